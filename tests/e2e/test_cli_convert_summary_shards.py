"""The `stoker convert` summary counts shards in words: "1 shard", "2 shards"."""

from __future__ import annotations

import re

import numpy as np

from stoker.cli.main import main


def _summary(tmp_path, capsys, name: str, *extra: str) -> str:
    src = tmp_path / "x.npy"
    np.save(src, np.arange(4096, dtype=np.int64))
    assert main(["convert", "arrays", f"x={src}", str(tmp_path / name), *extra]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote "))


def test_one_shard_is_singular(tmp_path, capsys):
    line = _summary(tmp_path, capsys, "one")
    assert " 1 shard," in line and "1 shards" not in line


def test_several_shards_are_plural(tmp_path, capsys):
    line = _summary(tmp_path, capsys, "two", "--shard-size", "16KB")  # 32 KiB of int64 rows
    assert " 2 shards," in line


def test_input_rate_of_a_small_file_is_not_rounded_to_zero(tmp_path, capsys):
    """A 32 KiB HDF5 file converts in milliseconds: its input rate was printed as "0 MB/s"."""
    h5py = __import__("pytest").importorskip("h5py")
    src = tmp_path / "small.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(4096, dtype=np.int64)
    assert main(["convert", "hdf5", str(src), str(tmp_path / "out")]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("wrote "))
    # three significant figures in binary units at any speed (the old "{:,.0f} MB/s" gave "0 MB/s")
    assert re.search(r", \d+\.\d (KiB|MiB|GiB)/s of input$", line), line
    assert " in 0.0 s" not in line, line
