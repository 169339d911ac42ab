"""Growable flat arrays of the token cache: in memory, then in a mapped temporary file."""

import tempfile
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.text.spill import MEMORY_ENV, PREFIX, FlatArray, SpillDir, memory_limit, sweep_stale


def test_an_array_moves_to_a_file_past_its_limit_and_keeps_every_value(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spill = SpillDir()
    flat = FlatArray(np.uint16, "ids", limit=300_000, spill=spill)
    parts = [(np.arange(50_000) * 7 + k).astype(np.uint16) for k in range(6)]
    views = []
    for part in parts:
        start = flat.append(part)
        views.append((start, flat.array))  # a view taken then must stay valid after later growth
    assert flat.path is not None and Path(flat.path).parent.parent == tmp_path
    want = np.concatenate(parts)
    assert np.array_equal(flat.array[: flat.used], want)
    for (start, view), part in zip(views, parts):
        assert np.array_equal(view[start : start + len(part)], part)
    spill.remove()
    assert list(tmp_path.iterdir()) == []


def test_the_memory_limit_is_read_from_the_environment_when_asked(monkeypatch):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert memory_limit() == 1 << 30
    monkeypatch.setenv(MEMORY_ENV, "4096")
    assert memory_limit() == 4096
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(ConfigError, match=MEMORY_ENV) as err:
        memory_limit()
    assert err.value.option == MEMORY_ENV


def test_the_sweep_removes_only_directories_of_dead_processes(tmp_path):
    import os
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f"{PREFIX}{int(dead.stdout)}-abc"
    mine = tmp_path / f"{PREFIX}{os.getpid()}-abc"
    other = tmp_path / "stoker-textual-notes"
    for d in (gone, mine, other):
        d.mkdir()
        (d / "input_ids.bin").write_bytes(b"x")
    assert sweep_stale(str(tmp_path)) == 1
    assert not gone.exists() and mine.exists() and other.exists()
