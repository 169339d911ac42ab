"""Real files written by other tools, fetched by package name into a cache reused across runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the sweep beside this file (hdf5_sweep.py)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fetch_hdf5_samples.py"
UNREACHABLE = 3  # the script's exit status when the package registry cannot be reached


@pytest.fixture(scope="session")
def hdf5_samples() -> Path:
    """The HDF5 test files of PyTables and h5py (``scripts/fetch_hdf5_samples.py``), under
    ``$STOKER_TEST_DATA/hdf5`` (default ``~/.cache/stoker-test-data/hdf5``); fetched once."""
    pytest.importorskip("h5py")
    root = Path(os.environ.get("STOKER_TEST_DATA", "~/.cache/stoker-test-data")).expanduser() / "hdf5"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(root)], capture_output=True, text=True, timeout=900
    )
    if proc.returncode == UNREACHABLE:
        pytest.skip(f"the package registry cannot be reached to fetch the HDF5 samples:\n{proc.stderr[-1000:]}")
    assert proc.returncode == 0, proc.stderr
    return root
