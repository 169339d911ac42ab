"""The stoker command as a user runs it: exit codes and what it prints."""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from stoker.cli.main import build_parser, main


def run(*args):
    cmd = [sys.executable, "-m", "stoker.cli.main", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # a hang bound, not a speed
    return proc.returncode, proc.stdout, proc.stderr


def test_help_on_every_command():
    for cmd in ([], ["inspect"], ["tune"], ["convert"], ["demo"]):
        code, out, _ = run(*cmd, "--help")
        assert code == 0 and "usage: stoker" in out


def test_no_command_prints_help_and_exits_2():
    code, out, _ = run()
    assert code == 2 and "inspect" in out


def test_inspect(mixed_store):
    code, out, err = run("inspect", str(mixed_store), "--shards")
    assert code == 0, err
    assert "300" in out and "sequence<int32>" in out and "uint8[4, 5, 3]" in out and "shard-00001.arrow" in out


def test_inspect_json_and_verify(mixed_store):
    code, out, _ = run("inspect", str(mixed_store), "--json", "--verify")
    assert code == 0
    obj = json.loads(out)
    assert obj["num_rows"] == 300 and obj["verified"] is True


def test_verify_catches_an_altered_shard(mixed_store):
    shard = mixed_store / "shard-00000.arrow"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1  # inside the data buffers: only the checksum can tell
    shard.write_bytes(bytes(data))
    assert run("inspect", str(mixed_store))[0] == 0
    code, _, err = run("inspect", str(mixed_store), "--verify")
    assert code == 1 and "shard-00000.arrow" in err and "altered" in err


def test_wrong_path(tmp_path):
    code, out, err = run("inspect", str(tmp_path / "nowhere"))
    assert code == 1 and "does not exist" in err and "Traceback" not in err


def _table_rows(out):
    """The body rows of the rich tables in ``out``, as lists of cells."""
    return [[c.strip() for c in line.strip("│ ").split("│")] for line in out.splitlines() if line.startswith("│")]


def test_inspect_prints_rich_tables(mixed_store):
    """Issue 16 item 23: rich tables, as the doctor prints, not dashes under plain columns."""
    code, out, err = run("inspect", str(mixed_store), "--shards")
    assert code == 0, err
    assert "┃" in out and "└" in out and "---" not in out  # no dash rules (a "--verify" hint is fine)
    assert _table_rows(out)
    code, out, _ = run("inspect", str(mixed_store), "--json")
    assert code == 0 and json.loads(out)["num_rows"] == 300  # --json stays plain JSON


def test_bad_option_is_usage_error():
    code, _, err = run("inspect")
    assert code == 2 and "required" in err


def test_demo_without_data_says_how_to_fetch(tmp_path):
    code, _, err = run("demo", "--data", str(tmp_path))
    assert code == 1 and "fetch_data.py" in err


def _closed_pipe_run(*args, cwd=None):
    """The command with its stdout a pipe whose reading end is already closed (``| head`` that has exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "stoker.cli.main", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,  # a hang bound, not a speed
            cwd=cwd,
        )
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "{store}", "--shards"],
        ["inspect", "{store}", "--json"],
        ["convert", "arrays", "a.npz", "out", "--no-progress"],
        ["--help"],
    ],
)
def test_output_into_a_closed_pipe_ends_quietly(mixed_store, tmp_path, argv):
    """Issue 16 item 20: ``stoker inspect X | head`` ends without a BrokenPipeError traceback."""
    np.savez(tmp_path / "a.npz", x=np.arange(10))
    code, err = _closed_pipe_run(*(a.format(store=mixed_store) for a in argv), cwd=tmp_path)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code in (0, 1)


def test_errors_name_flags_not_keywords(tmp_path, capsys):
    """Issue 16 item 21: the CLI says ``--overwrite``, not ``pass overwrite=True``."""
    np.savez(tmp_path / "a.npz", x=np.arange(10))
    argv = ["convert", "arrays", str(tmp_path / "a.npz"), str(tmp_path / "s"), "--no-progress"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "pass --overwrite to replace it" in err and "overwrite=True" not in err
    (tmp_path / "t.data").write_text("a\n1\n")
    assert main(["convert", "table", str(tmp_path / "t.data"), str(tmp_path / "t")]) == 1
    err = capsys.readouterr().err
    assert "pass --format parquet, csv or json" in err and "format=" not in err
    assert main(["tune", str(tmp_path / "s"), "--batch-size", "0"]) == 1
    assert "stoker: error: --batch-size must be" in capsys.readouterr().err


def _commands(parser, path=()):
    yield list(path)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


RST = re.compile(r"``|`|:[a-z]+:|\bSECTIONS\b|\bKINDS\b|register\(")


@pytest.mark.parametrize("command", list(_commands(build_parser())), ids=lambda c: " ".join(c) or "stoker")
def test_help_has_no_rst_markup(command, capsys):
    """Issue 16 item 22: no command's --help shows ``literals``, :roles: or the code's internal names."""
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and out.startswith("usage: stoker")
    assert not RST.findall(out), out
