"""Fixtures of the sources tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test helpers beside this file (hdf5_files.py)
from hdf5_files import make_h5  # noqa: E402


@pytest.fixture
def h5(tmp_path: Path) -> Path:
    pytest.importorskip("h5py")
    return make_h5(tmp_path)
