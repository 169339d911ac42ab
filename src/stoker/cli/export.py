"""``stoker export STORE DIR``: a store as files other Arrow tools read.

A store's shards are Arrow IPC streams (``datasets.Dataset.from_file`` reads them as they are). The
export writes Arrow IPC files (pyarrow.dataset ``format="arrow"``, polars ``scan_ipc``, pandas
``read_feather``), Parquet (duckdb ``FROM 'DIR/*.parquet'``) or IPC streams, one file per shard,
tensor columns as nested fixed-size lists of their shape (``stoker.store.interop.tensor`` reads
one back as a numpy array).
"""

from __future__ import annotations

import argparse

from stoker.cli.output import human_bytes
from stoker.store.interop import FORMATS, export
from stoker.stores import open as open_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write a store as Arrow IPC files or Parquet for other tools", description=__doc__
    )
    p.add_argument("store", help="path of the store directory, or its object-store URL (s3://, gs://, ...)")
    p.add_argument("directory", help="the directory to write the files into")
    p.add_argument("--format", choices=sorted(FORMATS), default="ipc", help="ipc (default), parquet or stream")
    p.add_argument(
        "--flat-tensors",
        dest="shaped_tensors",
        action="store_false",
        help="keep tensor columns as flat fixed-size lists (default: nested lists of their shape)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace DIRECTORY if it exists")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    files = export(
        open_store(args.store),
        args.directory,
        format=args.format,
        shaped_tensors=args.shaped_tensors,
        overwrite=args.overwrite,
    )
    size = sum(f.stat().st_size for f in files)
    print(f"wrote {len(files)} {args.format} files ({human_bytes(size)}) to {args.directory}")
    return 0
