"""stoker.cli.helptext: reST markup out of every parser's help, the words kept."""

from __future__ import annotations

import argparse

import pytest

from stoker.cli.helptext import plain, plain_help


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("``stoker inspect STORE``: what a store holds", "stoker inspect STORE: what a store holds"),
        ("see :class:`stoker.Loader` and :meth:`~stoker.Store.gather`", "see stoker.Loader and stoker.Store.gather"),
        ("a :ref:`guide <guide-label>` and `code`", "a guide and code"),
        ("plain text (default 3), a 'quote'", "plain text (default 3), a 'quote'"),
        (None, None),
    ],
)
def test_plain(text, expected):
    assert plain(text) == expected


def test_plain_help_rewrites_the_whole_tree():
    p = argparse.ArgumentParser(prog="x", description="``x``: a :class:`Tool`")
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("run", help="runs ``it``", description="``x run``", epilog=":func:`f`")
    s.add_argument("--n", help="``N`` items")
    plain_help(p)
    text = p.format_help() + s.format_help()
    assert "`" not in text and ":class:" not in text and ":func:" not in text
    assert "x: a Tool" in text and "runs it" in text and "N items" in text and "x run" in s.format_help()
