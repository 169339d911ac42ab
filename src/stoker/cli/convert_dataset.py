"""``stoker convert dataset MODULE:ATTRIBUTE STORE``: any map-style torch Dataset into a store.

ATTRIBUTE is a Dataset object, or a class or function that makes one without arguments (it is
called). The current directory is importable, as with ``python -m``. ``__getitem__`` runs
in --workers processes; an interrupted conversion resumes when run again.

    stoker convert dataset mydata:train_set stores/train --workers 8 --names image,label
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import warnings
from typing import Any

from stoker.cli.convert_common import kind_parser, on_error_option, shared, shared_options, split_list, summary, warn
from stoker.errors import ConfigError


def register(kinds: argparse._SubParsersAction) -> None:
    p = kind_parser(kinds, "dataset", "any map-style torch Dataset (module:attribute)", __doc__, raw=True)
    p.add_argument("target", metavar="MODULE:ATTRIBUTE", help="where the Dataset (or a no-argument factory) lives")
    p.add_argument("store", help="the store directory to create")
    p.add_argument("--names", help="column names for tuple samples, e.g. image,label (default 0,1,...)")
    on_error_option(p, help="a sample that raises: stop (default) or skip and count it")
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
    if _is_dataset(obj):
        return obj
    if not callable(obj):
        raise ConfigError(
            f"{target} is an object of type {type(obj).__name__}, not a map-style Dataset (__len__ and __getitem__) "
            "nor a class or function that makes one without arguments",
            option="target",
        )
    _check_no_arguments(target, obj)
    made = obj()
    if not _is_dataset(made):
        raise ConfigError(
            f"{target}() returned an object of type {type(made).__name__}, not a map-style Dataset (__len__ and __getitem__)",
            option="target",
        )
    return made


def _is_dataset(obj: Any) -> bool:
    """A map-style Dataset object: ``__len__`` and ``__getitem__`` on an instance (a class has them too)."""
    return not isinstance(obj, type) and hasattr(obj, "__getitem__") and hasattr(obj, "__len__")


def _check_no_arguments(target: str, factory: Any) -> None:
    """A ConfigError when ``factory`` (a class or a function) cannot be called without arguments."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature to read (some builtins): calling it will tell
        return
    try:
        signature.bind()
    except TypeError:
        raise ConfigError(
            f"{target} needs arguments {signature}; point at a Dataset object, or at a class or function "
            "that takes no arguments (for example a module-level train_set = MyDataset(...))",
            option="target",
        ) from None


def _show_resume(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    warn(str(message))


def main(args: argparse.Namespace) -> int:
    import stoker.convert
    from stoker.convert.from_dataset import staging_dir

    dataset = load_target(args.target)
    try:
        with warnings.catch_warnings():  # "resuming at row N" as one stoker: line on stderr
            warnings.showwarning = _show_resume
            result = stoker.convert.dataset(
                dataset,
                args.store,
                names=split_list(args.names),
                on_error=args.on_error,
                chunk_size=args.chunk_size,
                metadata={"target": args.target},  # a resume must name the same MODULE:ATTRIBUTE
                **shared(args),
            )
    except KeyboardInterrupt:
        from pathlib import Path

        warn(
            f"interrupted; finished shards are kept in {staging_dir(Path(args.store))}: run the same command again to resume"
        )
        return 130
    indices = result.report.get("skipped_indices", [])
    summary(
        result,
        skipped=f"failing samples, indices {indices[:10]}{' ...' if len(indices) > 10 else ''}",
        storage_options=args.storage_options,
    )
    return 0
