"""Properties of the sources: reads equal numpy fancy indexing; conversion round-trips; resume is exact."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stoker
from stoker.convert.from_dataset import resume_index

h5py = pytest.importorskip("h5py")

DTYPES = ["uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool"]


@st.composite
def arrays(draw):
    n = draw(st.integers(1, 60))
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return (rng.random((n, *shape)) * 100).astype(dtype)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    data=arrays(),
    batches=st.lists(st.lists(st.integers(0, 10**6), min_size=1, max_size=8), min_size=1, max_size=4),
    dense=st.sampled_from([1.0, 4.0, 1e9]),
    mmap=st.booleans(),
)
def test_hdf5_read_equals_fancy_indexing(data, batches, dense, mmap):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.h5"
        with h5py.File(path, "w") as f:
            f["x"] = data
        src = stoker.sources.HDF5(path, "x", dense=dense, mmap=mmap)
        chunk = [np.array([i % len(data) for i in b]) for b in batches]
        for got, idx in zip(src.read(chunk), chunk):
            np.testing.assert_array_equal(got["x"], data[idx])  # in the order asked
        src.close()


@settings(max_examples=20, deadline=None)
@given(data=arrays(), shard=st.integers(1, 2000))
def test_hdf5_and_arrays_conversion_round_trip(data, shard):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.h5"
        with h5py.File(path, "w") as f:
            f["x"] = data
        a = stoker.open(stoker.convert.hdf5(path, Path(tmp) / "h", "x", shard_size=shard))
        b = stoker.open(stoker.convert.arrays({"x": data}, Path(tmp) / "a", shard_size=shard))
        for ds in (a, b):
            assert ds.schema["x"] == stoker.Tensor(data.dtype, data.shape[1:])
            np.testing.assert_array_equal(ds[:]["x"], data)


@given(rows=st.integers(0, 50), skipped=st.sets(st.integers(0, 100), max_size=20))
def test_resume_index_is_the_first_index_not_stored(rows, skipped):
    start = resume_index(rows, sorted(skipped))
    stored = [i for i in range(start) if i not in skipped]
    assert len(stored) == rows
    # the smallest such start: it is 0, or the index just before it was stored
    assert (rows == 0 and start == 0) or (start - 1) not in skipped
