"""Help texts in plain words: the reStructuredText markup of docstrings taken out of every parser's help.

Commands take their descriptions from their module docstrings, written with reST markup (double
backticks around code, roles such as :class: before a name). ``plain_help`` rewrites a whole parser
tree once it is built, so that --help shows the words without the markup.
"""

from __future__ import annotations

import argparse
import re

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :class:`x`, :meth:`~a.b`, :ref:`t <x>`
_LITERAL = re.compile(r"``(.+?)``", re.S)
_INTERPRETED = re.compile(r"(?<![\w`])`([^`\n]+)`(?![\w`])")


def plain(text: str | None) -> str | None:
    """``text`` without RST roles, double-backtick literals and interpreted text (their words stay)."""
    if not text:
        return text
    text = _ROLE.sub(lambda m: m.group(1).strip(), text)
    text = _LITERAL.sub(r"\1", text)
    return _INTERPRETED.sub(r"\1", text)


def plain_help(parser: argparse.ArgumentParser) -> None:
    """Rewrite, in place, the description, epilog and option help of ``parser`` and its subcommands."""
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    for action in parser._actions:
        if isinstance(action.help, str) and action.help != argparse.SUPPRESS:
            action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:  # the one-line help listed under the parent
                choice.help = plain(choice.help)
            for sub in action.choices.values():
                plain_help(sub)
