"""Loader batches whose row copy is cut into ranges shared by the worker threads: every row lands
in its own place, for stores (several shards, views, every column kind) and in-memory arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import stoker
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.parts import SPLIT_BYTES, SPLIT_ENV, part_bounds

N = 300
IMAGE = (64, 64, 4)  # 16 KiB uint8 rows: a batch of 192 is 3 MiB, cut into ranges


def _images(n: int) -> np.ndarray:
    # each row carries its row number in its first bytes and a per-row pattern after them
    x = (np.arange(n, dtype=np.uint64)[:, None] * 2654435761 + np.arange(np.prod(IMAGE))) % 251
    x = x.astype(np.uint8).reshape(n, *IMAGE)
    x[:, 0, 0, :2] = np.stack([np.arange(n) // 256, np.arange(n) % 256], axis=1)
    return x


@pytest.fixture(autouse=True, params=["always", "never"])
def split_copies(request, monkeypatch):
    """Ranges cut (always), and as users get them by default (never)."""
    monkeypatch.setenv(SPLIT_ENV, request.param)


@pytest.fixture(scope="module")
def columns():
    rng = np.random.default_rng(5)
    return {
        "image": _images(N),
        "feat": rng.standard_normal((N, 3, 32, 32), dtype=np.float32),
        "label": np.arange(N, dtype=np.int64),
        "ids": [np.arange(int(k), dtype=np.int32) + i for i, k in enumerate(rng.integers(1, 9, N))],
        "name": [f"row {i}" for i in range(N)],
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory, columns):
    path = tmp_path_factory.mktemp("split") / "s"
    return stoker.write(path, columns, shard_size=1 << 20)  # ~1 MiB shards: every batch spans several


def _check(batch, columns, rows):
    np.testing.assert_array_equal(batch["label"].numpy(), rows)
    np.testing.assert_array_equal(batch["image"].numpy(), columns["image"][rows])
    np.testing.assert_array_equal(batch["feat"].numpy(), columns["feat"][rows])


def test_these_batches_are_cut_into_ranges():
    row = int(np.prod(IMAGE)) + 3 * 32 * 32 * 4 + 8
    assert 192 * row >= SPLIT_BYTES and len(part_bounds(192, row, 2)) > 2


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("shuffle", [True, False])
def test_store_batches_split_across_threads_are_exact(store, columns, workers, shuffle):
    ds = stoker.open(store)
    assert ds.num_shards > 4
    loader = stoker.Loader(ds, batch_size=192, shuffle=shuffle, num_workers=workers, drop_last=False)
    seen = []
    for _epoch in range(2):
        for batch in loader:
            rows = batch["label"].numpy().copy()
            assert len(np.unique(rows)) == len(rows) and (shuffle or np.all(np.diff(rows) > 0))
            _check(batch, columns, rows)
            assert batch["name"] == [columns["name"][r] for r in rows]
            for i, r in enumerate(rows):
                k = len(columns["ids"][r])
                assert batch["ids_lengths"][i] == k
                np.testing.assert_array_equal(batch["ids"][i, :k].numpy(), columns["ids"][r])
            seen.append(rows)
    assert sorted(np.concatenate(seen).tolist()) == sorted(list(range(N)) * 2)


def test_views_and_splits_split_across_threads_are_exact(store, columns):
    ds = stoker.open(store)
    part = ds.split([0.8, 0.2], seed=2)[0]
    view = ds.select(np.random.default_rng(0).permutation(N)[:250])
    for source in (part, view):
        loader = stoker.Loader(source, batch_size=200, shuffle=True, num_workers=2, columns=["image", "feat", "label"])
        seen = []
        for batch in loader:
            rows = batch["label"].numpy().copy()
            _check(batch, columns, rows)
            seen.append(rows)
        assert sorted(np.concatenate(seen).tolist()) == sorted(source.rows.tolist())  # each row once


def test_held_batches_are_never_overwritten(store, columns):
    """Batches kept across many steps keep their rows while later batches are copied in ranges."""
    loader = stoker.Loader(store, batch_size=192, shuffle=True, num_workers=2, columns=["image", "feat", "label"])
    kept = [b for _ in range(3) for b in loader]
    for batch in kept:
        _check(batch, columns, batch["label"].numpy())
    labels = np.concatenate([b["label"].numpy() for b in kept])
    assert sorted(labels.tolist()) == sorted(list(range(N)) * 3)


@pytest.mark.parametrize("positional", [False, True])
def test_arrays_split_across_threads_are_exact(columns, positional):
    x, f, y = columns["image"], columns["feat"], columns["label"]
    if positional:
        source = stoker.sources.Arrays(torch.from_numpy(x), torch.from_numpy(f), y)
    else:
        source = stoker.sources.Arrays(image=x, feat=f, label=y)
    seen = []
    for batch in stoker.Loader(source, batch_size=256, shuffle=True, num_workers=2):
        if positional:
            batch = {"image": batch[0], "feat": batch[1], "label": batch[2]}
        _check(batch, columns, batch["label"].numpy())
        seen.append(batch["label"].numpy().copy())
    assert sorted(np.concatenate(seen).tolist()) == list(range(N))


def test_a_tensordataset_chunk_split_across_threads_is_exact(columns):
    ds = torch.utils.data.TensorDataset(torch.from_numpy(columns["feat"]), torch.from_numpy(columns["label"]))
    seen = []
    for x, y in stoker.Loader(ds, batch_size=256, shuffle=True, num_workers=2):
        np.testing.assert_array_equal(x.numpy(), columns["feat"][y.numpy()])
        seen.append(y.numpy().copy())
    assert sorted(np.concatenate(seen).tolist()) == list(range(N))


def test_array_columns_without_a_buffer_pool_split_in_a_pool(columns):
    """ArrayColumns read outside the loader (no buffer pool), in a pool of threads."""
    from stoker.pipeline.threads import ordered_map

    source = ArrayColumns({"image": columns["image"], "label": columns["label"]})
    rng = np.random.default_rng(9)
    chunks = [[rng.choice(N, 250, replace=False)] for _ in range(6)]
    for chunk, (batch,) in zip(chunks, ordered_map(source.read, chunks, workers=2, depth=4)):
        rows = chunk[0]  # in the order asked
        np.testing.assert_array_equal(batch["label"], rows)
        np.testing.assert_array_equal(batch["image"], columns["image"][rows])
