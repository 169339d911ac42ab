"""``stoker convert table FILE STORE [--columns a,b]``: Parquet, CSV/TSV or JSON Lines into a store."""

from __future__ import annotations

import argparse

from stoker.cli.convert_common import kind_parser, shared, shared_options, split_list, summary


def register(kinds: argparse._SubParsersAction) -> None:
    p = kind_parser(kinds, "table", "a Parquet, CSV/TSV or JSON Lines file", __doc__)
    p.add_argument("file", help="the .parquet / .csv / .tsv / .jsonl file")
    p.add_argument("store", help="the store directory to create")
    p.add_argument("--columns", help="comma-separated column names (default: all)")
    p.add_argument("--format", choices=("parquet", "csv", "json"), help="the file's format (default: from its suffix)")
    shared_options(p, workers=None)  # read and written on one thread
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import stoker.convert

    summary(
        stoker.convert.table(args.file, args.store, split_list(args.columns), format=args.format, **shared(args)),
        storage_options=args.storage_options,
    )
    return 0
