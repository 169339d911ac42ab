"""StoreSource.read: one batch or a chunk of several, the same rows, and buffers never reused while held."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import stoker
from stoker.pipeline.store_source import StoreSource


@pytest.fixture
def store(tmp_path):
    rows = 40
    cols = {
        "x": np.arange(rows * 6, dtype=np.float32).reshape(rows, 2, 3),
        "label": np.arange(rows) * 10,
        "name": [f"row{i}" for i in range(rows)],
        "ids": [np.arange(i % 5 + 1, dtype=np.int32) for i in range(rows)],
    }
    return stoker.write(tmp_path / "s", cols, shard_size=200)  # several shards


def test_a_batch_alone_and_in_a_chunk_are_the_same(store):
    ds = stoker.open(store)
    assert ds.num_shards > 2
    source = StoreSource(ds, columns={"x": "x", "label": "y", "name": "name", "ids": "ids"})
    rng = np.random.default_rng(0)
    batches = [rng.permutation(40)[:7] for _ in range(3)]
    together = source.read(batches)
    for idx, chunked in zip(batches, together):
        (alone,) = source.read([idx])
        rows = idx  # rows of a batch come in the order asked (the sampler's)
        assert list(alone) == list(chunked) == ["x", "y", "name", "ids", "ids_lengths"]
        np.testing.assert_array_equal(alone["x"], np.arange(240, dtype=np.float32).reshape(40, 2, 3)[rows])
        np.testing.assert_array_equal(alone["y"], rows * 10)
        assert alone["name"] == [f"row{i}" for i in rows]
        np.testing.assert_array_equal(alone["ids_lengths"], rows % 5 + 1)
        for key in alone:
            assert type(alone[key]) is type(chunked[key])
            if isinstance(alone[key], np.ndarray):
                assert alone[key].dtype == chunked[key].dtype
                np.testing.assert_array_equal(alone[key], chunked[key])
            else:
                assert alone[key] == chunked[key]


def test_a_held_batch_is_never_overwritten(store):
    source = StoreSource(stoker.open(store), columns=["x", "label"])
    idx = [np.arange(i, i + 8) for i in range(0, 32, 8)]
    held = [source.read([i])[0] for i in idx]  # every batch kept: each needs its own buffer
    assert len({b["x"].__array_interface__["data"][0] for b in held}) == len(held)
    for i, batch in zip(idx, held):
        np.testing.assert_array_equal(batch["label"], i * 10)
    first = held[0]["x"].__array_interface__["data"][0]
    del held[0]
    gc.collect()
    again = source.read([np.arange(32, 40)])[0]
    assert again["x"].__array_interface__["data"][0] == first  # dropped, so recycled
    for i, batch in zip(idx[1:], held):
        np.testing.assert_array_equal(batch["label"], i * 10)  # the kept ones are untouched
