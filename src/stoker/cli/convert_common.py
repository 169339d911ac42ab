"""Shared parts of the ``stoker convert KIND`` commands: one flag per shared option, one summary line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stoker.cli.output import human_bytes


def kind_parser(
    kinds: argparse._SubParsersAction, name: str, help: str, doc: str | None, *, raw: bool = False
) -> argparse.ArgumentParser:
    """The parser of one ``stoker convert`` kind, described by its module docstring ``doc``.

    ``raw``: the description is printed as written (for docstrings with example commands, one a line).
    """
    formatter = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter
    return kinds.add_parser(name, help=help, description=doc, formatter_class=formatter)


def on_error_option(p: argparse.ArgumentParser, help: str) -> None:
    """``--on-error raise|skip`` (default raise): the ``on_error`` of the kinds that can leave a bad input out."""
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise", help=help)


def shared_options(p: argparse.ArgumentParser, workers: str | None) -> None:
    """The flags of :class:`stoker.convert.ConvertOptions`; ``workers`` is the help of ``--workers`` (None: no flag)."""
    p.add_argument("--overwrite", action="store_true", help="replace STORE if it exists")
    p.add_argument("--shard-size", default="256MB", help="bytes of data per shard at most (default 256MB)")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when it is a terminal)",
    )
    if workers is not None:
        p.add_argument("--workers", type=int, default=None, metavar="N", help=workers)


def shared(args: argparse.Namespace) -> dict[str, Any]:
    """The shared options as keywords for a ``stoker.convert`` function."""
    out = {"overwrite": args.overwrite, "shard_size": args.shard_size, "progress": args.progress}
    if hasattr(args, "workers"):
        out["workers"] = args.workers
    return out


def split_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def summary(result: Any, noun: str = "rows", skipped: str = "", source_bytes: int | None = None) -> None:
    """Two lines on stdout: what a :class:`stoker.convert.ConvertResult` wrote, then the store's schema.

    ``skipped`` says what the skipped inputs were (printed after their count when there are any).
    """
    from stoker.store.reader import Store

    ds = Store(result.path)
    seconds = result.seconds
    rate = f", {source_bytes / seconds / 1e6:,.0f} MB/s of input" if source_bytes and seconds > 0 else ""
    skip = f"; {result.skipped:,} skipped{f' ({skipped})' if skipped else ''}" if result.skipped else ""
    print(
        f"wrote {result.path}: {result.rows:,} {noun}, {ds.num_shards} shards, {human_bytes(ds.nbytes)} "
        f"in {seconds:.1f} s{rate}{skip}"
    )
    print(f"  {ds}")


def warn(message: str) -> None:
    print(f"stoker: {message}", file=sys.stderr)
