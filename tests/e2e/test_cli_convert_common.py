"""Every ``stoker convert KIND`` takes the shared flags and prints what its stoker.convert call returned."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import stoker
from stoker.cli.main import main

SHARED = ["--overwrite", "--shard-size", "100", "--no-progress"]


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["x"] = np.arange(80, dtype=np.float32).reshape(40, 2)
    np.savez(tmp_path / "a.npz", x=np.arange(40))
    (tmp_path / "t.csv").write_text("a\n" + "".join(f"{i}\n" for i in range(40)))
    (tmp_path / "c.txt").write_text("".join(f"line number {i}\n" for i in range(40)))
    (tmp_path / "convert_common_rows.py").write_text(
        textwrap.dedent("""
        class Rows:
            def __len__(self):
                return 40
            def __getitem__(self, i):
                return i
        rows = Rows()
    """)
    )
    monkeypatch.chdir(tmp_path)
    return {
        "hdf5": ["d.h5", "--keys", "x", "--workers", "2"],
        "arrays": ["a.npz", "--workers", "1"],
        "table": ["t.csv"],
        "text": ["c.txt", "--workers", "1"],
        "dataset": ["convert_common_rows:rows", "--workers", "0"],
    }


@pytest.mark.parametrize("kind", ["hdf5", "arrays", "table", "text", "dataset"])
def test_shared_flags_and_the_summary(kind, inputs, tmp_path, capsys):
    argv = ["convert", kind, inputs[kind][0], "s", *inputs[kind][1:], *SHARED]
    assert main(argv) == 0
    out = capsys.readouterr().out
    noun = "examples" if kind == "text" else "rows"
    assert out.startswith(f"wrote s: 40 {noun}, ")
    ds = stoker.open(tmp_path / "s")
    assert len(ds) == 40 and ds.num_shards > 1  # --shard-size reached the writer
    assert main(argv[: -len(SHARED)]) == 1  # the store exists and --overwrite is gone
    assert "exists" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["hdf5", "arrays", "text", "dataset"])
def test_a_bad_workers_flag_is_named(kind, inputs, capsys):
    argv = ["convert", kind, inputs[kind][0], "s", *inputs[kind][1:], "--workers", "-1"]
    assert main(argv) == 1
    assert "workers must be an integer >= 0" in capsys.readouterr().err


def test_table_has_no_workers_flag(inputs):
    with pytest.raises(SystemExit) as info:
        main(["convert", "table", "t.csv", "s", "--workers", "2"])
    assert info.value.code == 2
