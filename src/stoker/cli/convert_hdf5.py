"""``stoker convert hdf5 FILE STORE --keys data,labels``: HDF5 datasets into a store, chunk by chunk."""

from __future__ import annotations

import argparse

from stoker.cli.convert_sources import common_options, split_list, summary, timed, writers_option


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("hdf5", help="datasets of an HDF5 file", description=__doc__)
    p.add_argument("file", help="the .h5 / .hdf5 file")
    p.add_argument("store", help="the store directory to create")
    p.add_argument("--keys", help="comma-separated dataset names, e.g. data,labels (default: every dataset)")
    common_options(p)
    writers_option(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import os

    from stoker.sources.hdf5_convert import hdf5_to_store

    store, seconds = timed(
        hdf5_to_store, args.file, args.store, split_list(args.keys),
        shard_size=args.shard_size, overwrite=args.overwrite, progress=args.progress, writers=args.writers,
    )  # fmt: skip
    summary(store, seconds, os.path.getsize(args.file))
    return 0
