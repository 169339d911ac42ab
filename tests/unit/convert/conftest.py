"""Fixtures of the conversion tests: the image helpers of the vision tests, the HDF5 file of the sources tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "vision"))  # vision_images.py: small real JPEG/PNG files
sys.path.insert(0, str(Path(__file__).parent.parent / "sources"))  # hdf5_files.py: a small HDF5 file
from hdf5_files import make_h5  # noqa: E402
from vision_images import make_folder  # noqa: E402


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


@pytest.fixture
def h5(tmp_path: Path) -> Path:
    pytest.importorskip("h5py")
    return make_h5(tmp_path)
