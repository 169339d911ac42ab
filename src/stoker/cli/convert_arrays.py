"""``stoker convert arrays SRC... STORE``: .npz files, or .npy files as NAME=FILE.npy, into a store.

stoker convert arrays train.npz stores/train
stoker convert arrays image=images.npy label=labels.npy stores/train
"""

from __future__ import annotations

import argparse

from stoker.cli.convert_common import kind_parser, shared, shared_options, summary
from stoker.errors import ConfigError


def register(kinds: argparse._SubParsersAction) -> None:
    p = kind_parser(kinds, "arrays", ".npy / .npz arrays (memory-mapped)", __doc__, raw=True)
    p.add_argument("sources", nargs="+", metavar="SRC", help="an .npz file, or NAME=FILE.npy pairs")
    p.add_argument("store", help="the store directory to create")
    shared_options(p, workers="shards written at once (default: one per core, at most 4)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import stoker.convert

    if len(args.sources) == 1 and args.sources[0].endswith(".npz"):
        data: object = args.sources[0]
    else:
        pairs = {}
        for src in args.sources:
            name, sep, path = src.partition("=")
            if not sep or not name or not path.endswith(".npy"):
                raise ConfigError(f"{src!r}: give one .npz file, or NAME=FILE.npy pairs", option="sources")
            pairs[name] = path
        data = pairs
    summary(stoker.convert.arrays(data, args.store, **shared(args)), storage_options=args.storage_options)
    return 0
