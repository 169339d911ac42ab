"""The stoker command as a user runs it: exit codes and what it prints."""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import stoker
import stoker.convert
from stoker.cli.main import build_parser, main


def run(*args):
    cmd = [sys.executable, "-m", "stoker.cli.main", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # a hang bound, not a speed
    return proc.returncode, proc.stdout, proc.stderr


def test_help_on_every_command():
    for cmd in ([], ["inspect"], ["bench"], ["convert"], ["demo"]):
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


def test_bench(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.zeros((500, 16), np.float32), "y": np.arange(500)})
    code, out, err = run("bench", str(tmp_path / "s"), "--batch-size", "64", "--workers", "0,2", "--seconds", "0.3")
    assert code == 0, err
    rows = _table_rows(out)
    assert [r[0] for r in rows] == ["0", "2"]
    assert all(float(r[1].replace(",", "")) > 0 for r in rows)
    # like with like: the median of interleaved rounds, inside the range of the rounds, and the verdict
    for r in rows:
        low, high = (float(x.replace(",", "")) for x in r[4].split("-"))
        assert low <= float(r[1].replace(",", "")) <= high
    assert "fastest: workers=" in out and "median of 3 interleaved rounds" in out


def test_inspect_and_bench_print_rich_tables(mixed_store):
    """Issue 16 item 23: rich tables, as the doctor prints, not dashes under plain columns."""
    for argv in (
        ["inspect", str(mixed_store), "--shards"],
        ["bench", str(mixed_store), "--workers", "0", "--seconds", "0.1"],
    ):
        code, out, err = run(*argv)
        assert code == 0, err
        assert "┃" in out and "└" in out and "---" not in out  # no dash rules (a "--verify" hint is fine)
        assert _table_rows(out)
    code, out, _ = run("inspect", str(mixed_store), "--json")
    assert code == 0 and json.loads(out)["num_rows"] == 300  # --json stays plain JSON


def test_bench_counts_binary_columns(tmp_path):
    """Issue 16 item 19: MB/s counts the bytes of binary columns (a JPEG store read as bytes showed ~0 MB/s)."""
    row = 100_000
    stoker.write(tmp_path / "s", {"blob": [bytes([i % 256]) * row for i in range(64)]})
    code, out, err = run("bench", str(tmp_path / "s"), "--batch-size", "8", "--workers", "0", "--seconds", "0.3")
    assert code == 0, err
    ((_, samples, mb, _, _),) = _table_rows(out)
    samples, mb = float(samples.replace(",", "")), float(mb.replace(",", ""))
    assert samples > 0 and mb == pytest.approx(samples * row / 1e6, rel=0.01, abs=0.1)


@pytest.fixture
def image_store(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in ("cat", "dog"):
        (tmp_path / "img" / c).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8)).save(tmp_path / "img" / c / f"{i}.jpg")
    stoker.convert.images(tmp_path / "img", tmp_path / "jpeg", progress=False)
    return tmp_path / "jpeg"


def test_bench_times_an_image_store_as_images(image_store):
    """Issue 16 item 19: an encoded image store is decoded and cropped (ImageSource), not read as bytes."""
    argv = ("bench", str(image_store), "--batch-size", "4", "--workers", "1", "--seconds", "0.2", "--size", "32")
    code, out, err = run(*argv)
    assert code == 0, err
    assert (
        "stoker.vision.ImageSource (RandomResizedCrop(32) + RandomHorizontalFlip" in out and "[a images store]" in out
    )
    ((_, samples, mb, _, _),) = _table_rows(out)
    samples, mb = float(samples.replace(",", "")), float(mb.replace(",", ""))
    assert samples > 0 and mb == pytest.approx(samples * (3 * 32 * 32 + 8) / 1e6, rel=0.01, abs=0.1)  # uint8 + label
    code, out, err = run(*argv[:-2], "--mode", "plain")
    assert code == 0 and "stoker.Loader  [--mode plain]" in out
    code, _, err = run(*argv, "--columns", "image")
    assert code == 1 and "--columns selects the columns of a plain store" in err


def test_bench_times_a_text_store_as_text(tmp_path):
    """Issue 16 item 19: a store of tokenized text is padded by stoker.text.Loader."""
    pytest.importorskip("tokenizers")
    (tmp_path / "c.txt").write_text("".join(f"line number {i} of the corpus\n" for i in range(64)))
    stoker.convert.text(tmp_path / "c.txt", tmp_path / "t", progress=False)
    code, out, err = run("bench", str(tmp_path / "t"), "--batch-size", "8", "--workers", "0", "--seconds", "0.2")
    assert code == 0, err
    assert "stoker.text.Loader" in out and "[a text store]" in out
    code, _, err = run("bench", str(tmp_path / "t"), "--size", "32", "--seconds", "0.1")
    assert code == 1 and "--size 32 sets the crop of an image store" in err


@pytest.mark.parametrize("workers", ["x", "-1", ""])
def test_bench_bad_workers(tmp_path, workers):
    stoker.write(tmp_path / "s", {"y": np.arange(5)})
    assert main(["bench", str(tmp_path / "s"), "--workers", workers, "--seconds", "0.1"]) == 1


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
        ["bench", "{store}", "--workers", "0", "--seconds", "0.1"],
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
    assert main(["bench", str(tmp_path / "s"), "--batch-size", "0", "--seconds", "0.1"]) == 1
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
