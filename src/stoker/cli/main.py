"""``stoker``: the command-line entry point.

Each command lives in its own module with ``register(subparsers)``, which adds its parser
and sets ``func`` to a function ``(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from stoker.errors import StokerError

COMMANDS = ("stoker.cli.inspect", "stoker.cli.bench", "stoker.cli.convert", "stoker.cli.demo", "stoker.cli.doctor")

EXIT_OK = 0
EXIT_ERROR = 1  # a stoker error: bad input, corrupt store, ...
EXIT_USAGE = 2  # bad arguments (argparse's own code)
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    from stoker import __version__

    parser = argparse.ArgumentParser(
        prog="stoker", description="Keep GPUs fed: build memory-mapped stores and load them fast."
    )
    parser.add_argument("--version", action="version", version=f"stoker {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except StokerError as exc:
        print(f"stoker: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except FileNotFoundError as exc:
        print(f"stoker: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("stoker: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
