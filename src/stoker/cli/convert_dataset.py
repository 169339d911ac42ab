"""``stoker convert dataset MODULE:ATTRIBUTE STORE``: any map-style torch Dataset into a store.

ATTRIBUTE is a Dataset object, or a callable taking no arguments that returns one (a class,
a factory). The current directory is importable, as with ``python -m``. ``__getitem__`` runs
in --workers processes; an interrupted conversion resumes when run again.

    stoker convert dataset mydata:train_set stores/train --workers 8 --names image,label
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from stoker.cli.convert_common import shared, shared_options, split_list, summary, warn
from stoker.errors import ConfigError


def register(kinds: argparse._SubParsersAction) -> None:
    p = kinds.add_parser(
        "dataset",
        help="any map-style torch Dataset (module:attribute)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="MODULE:ATTRIBUTE", help="where the Dataset (or a no-argument factory) lives")
    p.add_argument("store", help="the store directory to create")
    p.add_argument("--names", help="column names for tuple samples, e.g. image,label (default 0,1,...)")
    p.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a sample that raises: stop (default) or skip and count it",
    )
    p.add_argument("--chunk-size", type=int, default=64, help="samples per worker task (default 64)")
    shared_options(p, workers="processes running __getitem__ (default: the usable cores; 0: in this process)")
    p.set_defaults(func=main)


def load_target(target: str) -> Any:
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{target!r} is not MODULE:ATTRIBUTE (for example mydata:train_set)", option="target")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"cannot import module {module_name!r} ({exc}); run from the directory that holds it", option="target"
        ) from exc
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}", option="target")
        obj = getattr(obj, part)
    if not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")) and callable(obj):
        obj = obj()
    if not (hasattr(obj, "__getitem__") and hasattr(obj, "__len__")):
        raise ConfigError(
            f"{target} is a {type(obj).__name__}, not a map-style Dataset (__len__ and __getitem__)", option="target"
        )
    return obj


def main(args: argparse.Namespace) -> int:
    import stoker.convert
    from stoker.convert.from_dataset import staging_dir

    dataset = load_target(args.target)
    try:
        result = stoker.convert.dataset(
            dataset,
            args.store,
            names=split_list(args.names),
            on_error=args.on_error,
            chunk_size=args.chunk_size,
            **shared(args),
        )
    except KeyboardInterrupt:
        from pathlib import Path

        warn(
            f"interrupted; finished shards are kept in {staging_dir(Path(args.store))}: run the same command again to resume"
        )
        return 130
    indices = result.report.get("skipped_indices", [])
    summary(result, skipped=f"failing samples, indices {indices[:10]}{' ...' if len(indices) > 10 else ''}")
    return 0
