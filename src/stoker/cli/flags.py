"""Library error messages in the words of the command line: Python keywords become the command's flags.

The library names its options as keywords (``pass overwrite=True``, ``on_error='skip'``); at the
command line the same option is a flag (``--overwrite``, ``--on-error skip``). The rule: a keyword
``name`` becomes ``--name-with-dashes`` when the command that ran has that flag (checked against
its parser, so a keyword the command has no flag for is left as it is). A few library keywords are
set by a flag of another name (``ALIASES``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

# library keyword -> the dest of the flag that sets it, where the two differ
ALIASES: Mapping[str, str] = {"num_workers": "workers"}

_QUOTED = r"'[^']*'|\"[^\"]*\""
_VALUE = rf"(?:{_QUOTED}|[^\s,;()\[\]{{}}]+)"
_KEYWORD = re.compile(rf"(?<![\w.\-'\"/\\])([A-Za-z_]\w*)=({_VALUE}(?:(?:, | or )(?:{_QUOTED}))*)?")


def command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command that ``args`` came from, following each subcommand chosen."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None) if action.dest != argparse.SUPPRESS else None
            if chosen in action.choices:
                return command_parser(action.choices[chosen], args)
    return parser


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest -> its action, for every option that has a ``--long`` flag."""
    return {
        a.dest: a for a in parser._actions if any(s.startswith("--") for s in a.option_strings) and a.dest != "help"
    }


def _long(action: argparse.Action) -> str:
    return next(s for s in action.option_strings if s.startswith("--"))


def _unquote(value: str) -> str:
    return re.sub(_QUOTED, lambda m: m.group(0)[1:-1], value)


def _as_flag(action: argparse.Action, value: str | None) -> str | None:
    """``--flag [value]`` for ``name=value``; None where the flag cannot say it (then the keyword stays)."""
    flag = _long(action)
    if value is None or value == "...":
        return flag
    if isinstance(action, argparse.BooleanOptionalAction):
        if value in ("True", "False"):
            return flag if value == "True" else next(s for s in action.option_strings if s.startswith("--no-"))
        return None
    if action.nargs == 0:  # store_true / store_const: only the flag itself
        return flag if value == "True" else None
    if value == "None":  # unset at the command line: the flag left out
        return None
    return f"{flag} {_unquote(value)}"


def in_flag_words(message: str, parser: argparse.ArgumentParser, option: str | None = None) -> str:
    """``message`` with every ``keyword=value`` of a flag of ``parser`` written as that flag.

    ``option`` (a ConfigError's) is the keyword the message is about: a message that starts with
    it (``workers must be ...``) starts with the flag instead.
    """
    flags = _flags(parser)

    def action_of(name: str) -> argparse.Action | None:
        return flags.get(ALIASES.get(name, name)) or flags.get(name)

    def keyword(m: re.Match[str]) -> str:
        action = action_of(m.group(1))
        flag = None if action is None else _as_flag(action, m.group(2))
        return m.group(0) if flag is None else flag

    out = _KEYWORD.sub(keyword, message)
    # "pass --overwrite (--overwrite)": a library message that named both says it once
    out = re.sub(r"(--[\w-]+(?: [^\s()]+)?) \(\1\)", r"\1", out)
    action = None if option is None else action_of(option)
    if action is not None and option is not None and re.match(rf"{re.escape(option)}\b", out):
        out = _long(action) + out[len(option) :]
    return out
