"""``stoker``: the command-line entry point.

Each command lives in its own module with ``register(subparsers)``, which adds its parser
and sets ``func`` to a function ``(args) -> exit code``. Here, for every command: the help texts
lose their reST markup (``helptext.py``), a stoker error is printed in flag words (``flags.py``),
an OSError no library code wrapped is one line too (no traceback), and
output into a closed pipe (``stoker inspect X | head``) ends quietly, as the Python docs'
recipe for SIGPIPE says: stdout pointed at /dev/null, exit code 1, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from stoker.cli.flags import command_parser, in_flag_words
from stoker.cli.helptext import plain_help
from stoker.errors import StokerError

COMMANDS = (
    "stoker.cli.inspect",
    "stoker.cli.convert",
    "stoker.cli.demo",
    "stoker.cli.doctor",
    "stoker.cli.tune",
    "stoker.cli.export",
)

EXIT_ERROR = 1  # a stoker error: bad input, corrupt store, ...
EXIT_USAGE = 2  # bad arguments (argparse's own code)
REMOVED = {"bench": "stoker tune STORE --grid --only workers measures every worker count of the store's loader"}
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
    plain_help(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code (argparse's own errors and --help exit through SystemExit)."""
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_ERROR


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at /dev/null, so the exit's final flush has nowhere to fail."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): nothing left to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _run(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words and words[0] in REMOVED:
        print(f"stoker: error: 'stoker {words[0]}' was removed: {REMOVED[words[0]]}", file=sys.stderr)
        return EXIT_USAGE
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except StokerError as exc:
        option = getattr(exc, "option", None)
        message = in_flag_words(str(exc), command_parser(parser, args), option)
        print(f"stoker: error: {message}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        raise  # output into a closed pipe: main() ends quietly
    except OSError as exc:  # a file the library did not wrap (a path that names a file where a directory goes)
        print(f"stoker: error: {os_error_words(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("stoker: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def os_error_words(exc: OSError) -> str:
    """An OSError in one line: the file(s) it names and the system's words, else its own message."""
    if exc.filename is None or not exc.strerror:
        return str(exc)
    files = f"{exc.filename}" + ("" if exc.filename2 is None else f" -> {exc.filename2}")
    hint = ""
    if isinstance(exc, (FileExistsError, NotADirectoryError)):
        hint = " (a file stands where a directory is needed: choose another path)"
    return f"{files}: {exc.strerror}{hint}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
