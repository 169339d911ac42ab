"""stoker.sources.Arrays (arrays into a store: tests/unit/convert/test_from_arrays.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import ConfigError, SchemaError
from stoker.sources import Arrays


def test_positional_arrays_give_tuples_like_a_tensordataset():
    x, y = np.arange(20).reshape(10, 2), torch.arange(10) * 10
    loader = stoker.Loader(stoker.sources.Arrays(x, y), batch_size=4, shuffle=True, num_workers=2)
    rows = []
    for xb, yb in loader:
        assert torch.equal(xb[:, 0] * 5, yb)
        rows += yb.tolist()
    assert sorted(rows) == list(range(0, 100, 10))


def test_tensordataset_and_named_arrays():
    ds = torch.utils.data.TensorDataset(torch.arange(6), torch.ones(6, 2))
    assert isinstance(stoker.sources.Arrays(ds).read([np.array([4, 1])])[0], tuple)
    batch = stoker.sources.Arrays(image=np.zeros((6, 2, 2)), label=np.arange(6)).read([np.array([5, 0])])[0]
    assert batch["label"].tolist() == [5, 0] and batch["image"].shape == (2, 2, 2)


def test_npy_and_uncompressed_npz_are_memory_mapped(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(12).reshape(6, 2))
    np.savez(tmp_path / "b.npz", x=np.arange(6, dtype=np.float32), y=np.arange(18).reshape(6, 3).T.copy().T)
    a = stoker.sources.Arrays(a=tmp_path / "a.npy")
    assert isinstance(a.columns["a"], np.memmap)
    b = stoker.sources.Arrays(tmp_path / "b.npz")
    assert all(isinstance(v, np.memmap) for v in b.columns.values())
    got = b.read([np.array([4, 2])])[0]
    assert got["x"].tolist() == [4.0, 2.0]
    np.testing.assert_array_equal(got["y"], np.arange(18).reshape(6, 3)[[4, 2]])


def test_compressed_npz_is_refused_with_a_fix(tmp_path):
    np.savez_compressed(tmp_path / "c.npz", x=np.arange(6))
    with pytest.raises(ConfigError, match="np.savez"):
        stoker.sources.Arrays(tmp_path / "c.npz")


def test_bad_arrays():
    with pytest.raises(SchemaError, match="different numbers of rows"):
        stoker.sources.Arrays(np.arange(3), np.arange(4))
    with pytest.raises(SchemaError, match="object"):
        stoker.sources.Arrays(np.array([{}, None], dtype=object))
    with pytest.raises(ConfigError, match="either all positionally or all by name"):
        stoker.sources.Arrays(np.arange(3), y=np.arange(3))


def test_batches_are_gathered_into_the_loader_buffers():
    x = np.arange(600 * 12, dtype=np.float32).reshape(600, 12)
    source = Arrays(x, np.arange(600))
    loader = stoker.Loader(source, batch_size=64, shuffle=True, num_workers=2)
    assert source._pool is loader.transfer.pool
    seen = []
    for xb, yb in loader:
        np.testing.assert_array_equal(xb.numpy(), x[yb.numpy()])
        seen.append(yb.clone())
    assert sorted(torch.cat(seen).tolist()) == list(range(600))
    buffers = [b for bufs in loader.transfer.pool._free.values() for b in bufs]
    assert buffers and any(b.shape[1:] == (12,) and b.dtype == np.float32 for b in buffers)


def test_tuple_batches_free_their_buffers_without_the_garbage_collector():
    """Batch buffers come back to the pool as soon as the batch is dropped (no reference cycle)."""
    import gc

    loader = stoker.Loader(Arrays(np.zeros((1000, 64, 64), np.float32), np.arange(1000)), batch_size=100, num_workers=0)
    gc.disable()
    try:
        for _ in range(3):
            for _xb, _yb in loader:
                pass
    finally:
        gc.enable()
    assert max(len(v) for v in loader.transfer.pool._free.values()) <= 3
