"""The `stoker convert` summary counts shards in words: "1 shard", "2 shards"."""

from __future__ import annotations

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
