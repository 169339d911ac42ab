"""`stoker convert hdf5` with compound fields and `--cast`: exit codes, messages, the store written."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.cli.main import main

h5py = pytest.importorskip("h5py")


@pytest.fixture
def h5(tmp_path):
    path = tmp_path / "t.h5"
    table = np.zeros(6, [("a", "<i4"), ("b", ">f8"), ("name", "S4")])
    table["a"], table["b"], table["name"] = np.arange(6), np.arange(6) / 2, [b"r%d" % i for i in range(6)]
    with h5py.File(path, "w") as f:
        f["t"] = table
        f["ld"] = np.arange(6, dtype=np.longdouble)
    return path


def test_long_double_exits_1_naming_the_cast_then_converts_with_it(h5, tmp_path, capsys):
    assert main(["convert", "hdf5", str(h5), str(tmp_path / "s"), "--keys", "ld", "--no-progress"]) == 1
    assert "--cast ld=float64" in capsys.readouterr().err
    args = ["convert", "hdf5", str(h5), str(tmp_path / "s"), "--keys", "t.a,t.name,ld", "--no-progress"]
    assert main([*args, "--cast", "ld=float64", "--cast", "t.name=str"]) == 0
    ds = stoker.open(tmp_path / "s")
    assert list(ds.schema) == ["t.a", "t.name", "ld"]
    assert ds[:]["ld"].dtype == np.float64 and ds[:]["t.name"] == [f"r{i}" for i in range(6)]


def test_a_malformed_cast_exits_1(h5, tmp_path, capsys):
    assert main(["convert", "hdf5", str(h5), str(tmp_path / "s"), "--cast", "float64"]) == 1
    assert "--cast takes COLUMN=DTYPE" in capsys.readouterr().err
