"""stoker.cli.flags: library keywords in error messages become the flags of the command that ran."""

from __future__ import annotations

import argparse

import pytest

from stoker.cli.flags import command_parser, in_flag_words


@pytest.fixture
def parser():
    p = argparse.ArgumentParser(prog="stoker")
    sub = p.add_subparsers(dest="command")
    c = sub.add_parser("convert")
    kinds = c.add_subparsers(dest="kind")
    k = kinds.add_parser("dataset")
    k.add_argument("target")
    k.add_argument("--overwrite", action="store_true")
    k.add_argument("--progress", action=argparse.BooleanOptionalAction)
    k.add_argument("--on-error", choices=("raise", "skip"))
    k.add_argument("--format")
    k.add_argument("--workers", type=int)
    k.add_argument("--chunk-size", type=int)
    return p


def test_command_parser_follows_the_subcommands(parser):
    args = parser.parse_args(["convert", "dataset", "m:x"])
    assert command_parser(parser, args).prog == "stoker convert dataset"
    assert command_parser(parser, parser.parse_args([])) is parser


@pytest.mark.parametrize(
    ("message", "option", "expected"),
    [
        ("s exists; pass overwrite=True to replace it", None, "s exists; pass --overwrite to replace it"),
        ("s exists; pass overwrite=True (--overwrite) to replace it", None, "s exists; pass --overwrite to replace it"),
        ("or pass on_error='skip' to go on", None, "or pass --on-error skip to go on"),
        ('or pass on_error="skip" (--on-error skip)', None, "or pass --on-error skip"),
        ("pass format='parquet', 'csv' or 'json'", "format", "pass --format parquet, csv or json"),
        ("progress=False silences it", None, "--no-progress silences it"),
        ("chunk_size must be an integer >= 1, got 0", "chunk_size", "--chunk-size must be an integer >= 1, got 0"),
        ("num_workers must be >= 0", "num_workers", "--workers must be >= 0"),
        # no such flag, or a value a flag cannot say: the keyword stays
        ("pass schema={'x': 1} or max_pixels=3", "max_pixels", "pass schema={'x': 1} or max_pixels=3"),
        ("workers=None picks a default", None, "workers=None picks a default"),
        ("target is not MODULE:ATTRIBUTE", "target", "target is not MODULE:ATTRIBUTE"),
        ("overwrite=True", "overwrite", "--overwrite"),
        ("no store at '/data/workers=3/s'", None, "no store at '/data/workers=3/s'"),
    ],
)
def test_in_flag_words(parser, message, option, expected):
    command = command_parser(parser, parser.parse_args(["convert", "dataset", "m:x"]))
    assert in_flag_words(message, command, option) == expected
