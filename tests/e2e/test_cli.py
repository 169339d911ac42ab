"""The stoker command as a user runs it: exit codes and what it prints."""

import json
import subprocess
import sys

import numpy as np
import pytest

import stoker
from stoker.cli.main import main


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "stoker.cli.main", *args], capture_output=True, text=True, timeout=120)
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


def test_bench(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.zeros((500, 16), np.float32), "y": np.arange(500)})
    code, out, err = run("bench", str(tmp_path / "s"), "--batch-size", "64", "--workers", "0,2", "--seconds", "0.3")
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.strip().startswith(("0 ", "2 "))]
    assert len(lines) == 2
    assert all(float(line.split()[1].replace(",", "")) > 0 for line in lines)


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
