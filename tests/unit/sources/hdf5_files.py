"""A small HDF5 file of every kind of dataset the HDF5 tests need (sources/ and convert/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_h5(directory: Path) -> Path:
    """``directory/data.h5``: 500 rows of ``data`` (float32, 3x4), ``labels``, a gzip-chunked
    ``group/chunked``, and the datasets stoker refuses or cannot pair: ``short`` (7 rows),
    ``names`` (bytes), ``vlen`` and ``text``."""
    import h5py

    path = directory / "data.h5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f["data"] = rng.random((500, 3, 4)).astype(np.float32)
        f["labels"] = np.arange(500, dtype=np.int64)
        f.create_dataset("group/chunked", data=np.arange(500, dtype=np.int16) * 3, chunks=(32,), compression="gzip")
        f["short"] = np.arange(7)
        f["names"] = np.array([b"abc"] * 500)
        f.create_dataset("vlen", (500,), dtype=h5py.vlen_dtype(np.int32))
        f.create_dataset("text", data=["x"] * 500, dtype=h5py.string_dtype())
    return path
