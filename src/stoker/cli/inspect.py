"""``stoker inspect STORE``: what a store holds, and whether it is intact."""

from __future__ import annotations

import argparse
import json

from stoker.cli.output import console, fields, human_bytes, table
from stoker.store.reader import _describe
from stoker.stores import open as open_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="show a store's schema, rows, shards and sizes", description=__doc__)
    p.add_argument("store", help="path of the store directory, or its object-store URL (s3://, gs://, ...)")
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every shard's checksum (xxh3_128; sha256 in format 1 stores) against the manifest",
    )
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p.add_argument("--shards", action="store_true", help="list every shard")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ds = open_store(args.store, verify=args.verify)  # checksums first: no shard is parsed before its bytes are checked
    if args.json:
        obj = ds.manifest.to_json()
        obj["path"] = ds.url  # a remote store's URL, not its local cache directory
        obj["bytes"] = ds.nbytes
        if args.verify:
            obj["verified"] = True
        print(json.dumps(obj, indent=2))
        return 0
    con = console()
    fields(
        [
            ("store", ds.url),
            ("rows", f"{len(ds):,}"),
            ("shards", f"{ds.num_shards} ({human_bytes(ds.nbytes)} on disk)"),
        ]
    )
    table(["column", "type"], [(name, _describe(col)) for name, col in ds.schema.items()], title="columns")
    if ds.metadata:
        fields([("metadata", json.dumps(ds.metadata)[:400])])
    if args.shards:
        table(
            ["shard", "rows", "bytes", "checksum"],
            [
                (s.file, f"{s.rows:,}", human_bytes(s.bytes), f"{s.algorithm}:{s.checksum[:16]}")
                for s in ds.manifest.shards
            ],
            title="shards",
        )
    if args.verify:
        con.print(f"verified: all {ds.num_shards} shards match their checksums", style="green")
    else:
        con.print("checksums not checked: --verify reads every shard and checks it", style="dim")
    return 0
