"""stoker.convert.arrays: numpy/torch arrays and .npy files into a store."""

from __future__ import annotations

import numpy as np
import torch

import stoker


def test_arrays_into_a_store_slab_by_slab(tmp_path):
    np.save(tmp_path / "img.npy", np.arange(600, dtype=np.uint8).reshape(100, 6))
    out = stoker.convert.arrays(
        {"img": tmp_path / "img.npy", "label": torch.arange(100)}, tmp_path / "s", shard_size=100, progress=False
    )
    ds = stoker.open(out)
    assert ds.num_shards > 5
    np.testing.assert_array_equal(ds[:]["img"], np.arange(600, dtype=np.uint8).reshape(100, 6))
    assert ds[:]["label"].tolist() == list(range(100))
    out2 = stoker.convert.arrays((np.zeros(3), np.ones(3)), tmp_path / "t", names=["a", "b"])
    assert list(stoker.open(out2).schema) == ["a", "b"]
