"""``stoker convert hdf5 FILE STORE --keys data,labels``: HDF5 datasets into a store, chunk by chunk."""

from __future__ import annotations

import argparse

from stoker.cli.convert_common import kind_parser, shared, shared_options, split_list, summary


def register(kinds: argparse._SubParsersAction) -> None:
    p = kind_parser(kinds, "hdf5", "datasets of an HDF5 file", __doc__)
    p.add_argument("file", help="the .h5 / .hdf5 file")
    p.add_argument("store", help="the store directory to create")
    p.add_argument("--keys", help="comma-separated dataset names, e.g. data,labels (default: every dataset)")
    shared_options(p, workers="shards written at once (default: one per core, at most 4)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import os

    import stoker.convert

    result = stoker.convert.hdf5(args.file, args.store, split_list(args.keys), **shared(args))
    summary(result, source_bytes=os.path.getsize(args.file))
    return 0
