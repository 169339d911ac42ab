"""`stoker convert hdf5|arrays|table|dataset` end to end: exit codes and output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import stoker
from stoker.cli.main import main

h5py = pytest.importorskip("h5py")


@pytest.fixture
def h5(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(300, dtype=np.float32).reshape(100, 3)
        f["labels"] = np.arange(100)
        f["short"] = np.arange(5)
    return path


def test_hdf5_ok(h5, tmp_path, capsys):
    assert main(["convert", "hdf5", str(h5), str(tmp_path / "s"), "--keys", "data,labels", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "100 rows" in out and "data: float32[3]" in out
    assert stoker.open(tmp_path / "s")[:]["labels"].tolist() == list(range(100))


def test_hdf5_workers_option(h5, tmp_path, capsys):
    args = [
        "convert",
        "hdf5",
        str(h5),
        str(tmp_path / "s"),
        "--keys",
        "data,labels",
        "--shard-size",
        "400",
        "--workers",
        "3",
    ]
    assert main(args) == 0
    ds = stoker.open(tmp_path / "s", verify=True)
    assert ds.num_shards > 3 and ds[:]["labels"].tolist() == list(range(100))
    assert main([*args[:-1], "0", "--overwrite"]) == 1
    assert "workers must be at least 1" in capsys.readouterr().err


def test_hdf5_bad_keys_exit_1_with_the_keys_present(h5, tmp_path, capsys):
    assert main(["convert", "hdf5", str(h5), str(tmp_path / "s"), "--keys", "data,nope"]) == 1
    err = capsys.readouterr().err
    assert "stoker: error:" in err and "the datasets present are ['data', 'labels', 'short']" in err
    assert main(["convert", "hdf5", str(h5), str(tmp_path / "s"), "--keys", "data,short"]) == 1
    assert "different numbers of rows" in capsys.readouterr().err
    assert main(["convert", "hdf5", str(tmp_path / "none.h5"), str(tmp_path / "s")]) == 1


def test_existing_store_exit_1(h5, tmp_path, capsys):
    args = ["convert", "hdf5", str(h5), str(tmp_path / "s"), "--keys", "labels"]
    assert main(args) == 0
    assert main(args) == 1
    assert "exists" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0


def test_arrays_and_table(tmp_path, capsys):
    np.savez(tmp_path / "a.npz", x=np.arange(10), y=np.ones((10, 2)))
    assert main(["convert", "arrays", str(tmp_path / "a.npz"), str(tmp_path / "a")]) == 0
    np.save(tmp_path / "x.npy", np.arange(4))
    assert main(["convert", "arrays", f"x={tmp_path / 'x.npy'}", str(tmp_path / "b")]) == 0
    assert main(["convert", "arrays", str(tmp_path / "x.npy"), str(tmp_path / "c")]) == 1
    (tmp_path / "t.csv").write_text("a,b\n1,x\n2,y\n")
    assert main(["convert", "table", str(tmp_path / "t.csv"), str(tmp_path / "t"), "--columns", "b"]) == 0
    assert stoker.open(tmp_path / "t")[:]["b"] == ["x", "y"]
    assert main(["convert", "table", str(tmp_path / "t.csv"), str(tmp_path / "u"), "--columns", "zz"]) == 1


MODULE = """
import time, os
import numpy as np
import torch

class Slow(torch.utils.data.Dataset):
    def __init__(self, n=4000, bad=(), delay=0.0):
        self.n, self.bad, self.delay = n, set(bad), delay
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        if i in self.bad:
            raise ValueError(f"bad sample {i}")
        if self.delay:
            time.sleep(self.delay)
        return torch.full((16,), i, dtype=torch.int32), i

ok = Slow(300)
broken = Slow(300, bad=[42, 250])
slow = Slow(4000, delay=float(os.environ.get("STOKER_TEST_DELAY", "0.002")))
def factory():
    return Slow(50)
class Fifty(Slow):
    def __init__(self):
        super().__init__(50)
class Sized(Slow):
    def __init__(self, n):
        super().__init__(n)
def not_a_dataset():
    return 5
number = 5
"""


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    (tmp_path / "mydata.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_dataset_module_attribute(module_dir, capsys):
    assert main(["convert", "dataset", "mydata:ok", "s", "--workers", "2", "--names", "x,label"]) == 0
    ds = stoker.open(module_dir / "s")
    assert ds[:]["label"].tolist() == list(range(300)) and ds.schema["x"] == stoker.Tensor("int32", (16,))
    assert main(["convert", "dataset", "mydata:factory", "f", "--workers", "0"]) == 0
    assert main(["convert", "dataset", "mydata:nothing", "n"]) == 1
    assert main(["convert", "dataset", "nomodule:x", "n"]) == 1
    assert "cannot import module 'nomodule'" in capsys.readouterr().err


def test_dataset_class_is_called(module_dir, capsys):
    """Issue 16 item 18: a Dataset class (not an instance) is called, as the help says."""
    assert main(["convert", "dataset", "mydata:Fifty", "c", "--workers", "0", "--no-progress"]) == 0
    assert stoker.open(module_dir / "c")[:]["1"].tolist() == list(range(50))


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mydata:Sized", "mydata:Sized needs arguments (n)"),
        ("mydata:not_a_dataset", "mydata:not_a_dataset() returned an object of type int, not a map-style Dataset"),
        ("mydata:number", "mydata:number is an object of type int, not a map-style Dataset"),
    ],
)
def test_dataset_target_that_makes_no_dataset(module_dir, capsys, target, message):
    assert main(["convert", "dataset", target, "c", "--workers", "0", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (module_dir / "c").exists()


def test_dataset_error_and_skip(module_dir, capsys):
    assert main(["convert", "dataset", "mydata:broken", "s", "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "dataset[42] raised ValueError: bad sample 42" in err and "--on-error skip" in err
    assert main(["convert", "dataset", "mydata:broken", "s", "--workers", "2", "--on-error", "skip"]) == 0
    assert "2 skipped (failing samples, indices [42, 250])" in capsys.readouterr().out
    assert len(stoker.open(module_dir / "s")) == 298


def test_killed_conversion_resumes(module_dir):
    """SIGKILL in the middle, then the same command finishes the job with every row once."""
    cmd = [
        sys.executable,
        "-m",
        "stoker.cli.main",
        "convert",
        "dataset",
        "mydata:slow",
        "s",
        "--workers",
        "2",
        "--shard-size",
        "4KB",
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(module_dir)}
    proc = subprocess.Popen(cmd, cwd=module_dir, env=env, start_new_session=True)
    partial = module_dir / ".s.partial"
    deadline = time.monotonic() + 600  # a bound for a hang (the child imports torch first), not a speed
    while time.monotonic() < deadline and len(list(partial.glob("shard-*.arrow"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (module_dir / "s").exists() and len(list(partial.glob("shard-*"))) >= 3
    first_shard = (partial / "shard-00000.arrow").stat().st_ino
    env["STOKER_TEST_DELAY"] = "0"
    done = subprocess.run(cmd, cwd=module_dir, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert stoker.open(module_dir / "s")[:]["1"].tolist() == list(range(4000))
    assert (module_dir / "s" / "shard-00000.arrow").stat().st_ino == first_shard  # kept, not written again
