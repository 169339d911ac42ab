"""``stoker convert table FILE STORE [--columns a,b]``: Parquet, CSV/TSV or JSON Lines into a store."""

from __future__ import annotations

import argparse

from stoker.cli.convert_sources import common_options, split_list, summary, timed


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser("table", help="a Parquet, CSV/TSV or JSON Lines file", description=__doc__)
    p.add_argument("file", help="the .parquet / .csv / .tsv / .jsonl file")
    p.add_argument("store", help="the store directory to create")
    p.add_argument("--columns", help="comma-separated column names (default: all)")
    p.add_argument("--format", choices=("parquet", "csv", "json"), help="the file's format (default: from its suffix)")
    common_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from stoker.sources.tables import table_to_store

    store, seconds = timed(
        table_to_store, args.file, args.store, split_list(args.columns), format=args.format,
        shard_size=args.shard_size, overwrite=args.overwrite, progress=args.progress,
    )  # fmt: skip
    summary(store, seconds)
    return 0
