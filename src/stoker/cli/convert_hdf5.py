"""``stoker convert hdf5 FILE STORE --keys data,labels``: HDF5 datasets into a store, chunk by chunk."""

from __future__ import annotations

import argparse

from stoker.cli.convert_common import kind_parser, shared, shared_options, split_list, summary


def register(kinds: argparse._SubParsersAction) -> None:
    p = kind_parser(kinds, "hdf5", "datasets of an HDF5 file", __doc__)
    p.add_argument("file", help="the .h5 / .hdf5 file")
    p.add_argument("store", help="the store directory to create")
    p.add_argument(
        "--keys",
        help="comma-separated dataset names, e.g. data,labels, or compound fields, e.g. table.col1,table.col3 "
        "(default: every dataset)",
    )
    p.add_argument(
        "--cast",
        action="append",
        default=[],
        metavar="COLUMN=DTYPE",
        help="read a column as another dtype, e.g. --cast x=float64 for long double data (str, bytes, uint8 "
        "for strings); repeat for several columns",
    )
    p.add_argument(
        "--allow-external",
        action="append",
        default=[],
        metavar="DIR",
        help="read files other than FILE (external links, external storage, virtual datasets) from DIR; repeat "
        "for several directories (default: none is read)",
    )
    p.add_argument(
        "--allow-fill",
        action="store_true",
        help="convert a dataset whose rows were mostly never written (over 64 MiB of fill value) instead of "
        "refusing it",
    )
    shared_options(p, workers="shards written at once (default: one per core, at most 4)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import os

    import stoker.convert

    cast = _casts(args.cast)
    result = stoker.convert.hdf5(
        args.file,
        args.store,
        split_list(args.keys),
        cast=cast or None,
        allow_external=args.allow_external,
        allow_fill=args.allow_fill,
        **shared(args),
    )
    summary(result, source_bytes=os.path.getsize(args.file), storage_options=args.storage_options)
    return 0


def _casts(pairs: list[str]) -> dict[str, str]:
    """``["x=float64", "t.name=str"]`` -> ``{"x": "float64", "t.name": "str"}``."""
    from stoker.errors import ConfigError

    out = {}
    for pair in pairs:
        column, sep, dtype = pair.rpartition("=")
        if not sep or not column or not dtype:
            raise ConfigError(f"--cast takes COLUMN=DTYPE, like x=float64; got {pair!r}", option="cast")
        out[column] = dtype
    return out
