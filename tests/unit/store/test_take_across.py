"""A shuffled batch over several shards in one ``np.take`` (``store/gather.py:take_across``): every
row where the sampler put it, for rows of any size, repeated rows included; where it cannot apply
(a strided array, a row past its shard's end) it does nothing and the per-shard path runs."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.store.gather import Plan, gather_tensor, take_across
from stoker.store.shards import ColumnView

N = 390  # 30 shards of 13 rows: every column starts at the same place in each shard


@pytest.fixture
def store(tmp_path):
    rng = np.random.default_rng(3)
    cols = {
        "img": rng.integers(0, 255, size=(N, 3, 8, 8), dtype=np.uint8),  # 192-byte rows
        "big": np.arange(N, dtype=np.float32)[:, None] * np.ones(1024, dtype=np.float32),  # 4 KiB rows
        "label": np.arange(N, dtype=np.int64),
        "odd": rng.integers(0, 255, size=(N, 5), dtype=np.uint8),  # 5-byte rows
        "xyz": rng.random((N, 3)),  # 24-byte float64 rows
    }
    path = stoker.write(tmp_path / "s", cols, shard_size=60_000)
    assert len(stoker.open(path).manifest.shards) > 3
    return path, cols


def test_a_shard_of_another_layout_takes_the_per_shard_path(tmp_path):
    # the last shard (fewer rows) has its second column elsewhere: rows of it come by take and scatter
    x = np.arange(400, dtype=np.float32)[:, None] * np.ones(1024, dtype=np.float32)
    ds = stoker.open(stoker.write(tmp_path / "t", {"y": np.arange(400), "x": x}, shard_size=60_000))
    rows = np.random.default_rng(2).permutation(400)[:200]
    assert np.array_equal(ds.gather(rows, ["x"])["x"], x[rows])


def _views(ds, name):
    return {s: ds._cache.get(s).columns[name] for s in range(len(ds.manifest.shards))}


def test_rows_of_every_size_land_in_the_samplers_order(store):
    path, cols = store
    ds = stoker.open(path)
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.permutation(N)[:150], [7, 7, N - 1, 0]])  # repeated rows too
    for name, col in cols.items():
        plan = Plan(rows, ds._starts)
        out = np.empty((len(rows), *col.shape[1:]), col.dtype)
        assert take_across(_views(ds, name), plan, out), name
        assert np.array_equal(out, col[rows]), name
        assert np.array_equal(ds.gather(rows, [name])[name], col[rows]), name


def test_it_steps_aside_where_it_cannot_apply_and_the_gather_is_still_right(store):
    path, cols = store
    ds = stoker.open(path)
    rows = np.random.default_rng(1).permutation(N)[:100]
    plan = Plan(rows, ds._starts)
    want = cols["xyz"][rows]
    views = _views(ds, "xyz")
    strided = {s: ColumnView(np.asfortranarray(v.data)) for s, v in views.items()}  # not C-contiguous
    short = {s: ColumnView(v.data[:1]) for s, v in views.items()}  # shorter than their shards
    for bad in (strided, short):
        out = np.full_like(want, -1.0)
        assert not take_across(bad, plan, out)
        assert (out == -1.0).all()  # nothing written
    out = np.empty_like(want)
    gather_tensor(strided, plan, out)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("name", ["img", "big", "label", "odd", "xyz"])
def test_shard_edges_repeats_and_every_batch_size_come_back_in_order(store, name):
    # every shard's first and last row, a row repeated at both ends, one row, two, none: byte for byte
    path, cols = store
    ds = stoker.open(path)
    starts = ds.shard_starts
    edges = np.concatenate([starts[:-1], starts[1:] - 1])
    rng = np.random.default_rng(4)
    for rows in (
        rng.permutation(edges),
        np.concatenate([[N - 1], rng.permutation(edges), rng.integers(0, N, 40), [N - 1]]),
        np.array([N - 1, 0]),
        np.array([200]),
        np.array([], dtype=np.int64),
    ):
        got = ds.gather(rows, [name])[name]
        want = cols[name][rows]
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes(), rows[:5]


def test_batches_of_other_shards_and_other_stores_at_the_same_addresses_are_right(tmp_path):
    # the take across keeps each set of shards' layout for the next batch: a batch of another set of
    # shards, or a store opened where a closed one was mapped, must still get its own rows
    rng = np.random.default_rng(6)
    for k in range(3):
        x = rng.integers(0, 2**31, size=(N, 200), dtype=np.int32) + k  # 800-byte rows, 6 shards or more
        ds = stoker.open(stoker.write(tmp_path / f"s{k}", {"x": x}, shard_size=60_000))
        starts = ds.shard_starts
        for a, b in ((0, 2), (1, 4), (0, len(starts) - 2)):  # rows of shards a..b, shuffled
            rows = rng.permutation(np.arange(starts[a], starts[b + 1]))[:60]
            assert np.array_equal(ds.gather(rows, ["x"])["x"], x[rows])
        del ds


def test_rows_outside_the_store_are_refused_by_the_plan():
    starts = np.array([0, 4, 9], dtype=np.int64)
    for rows in ([3, -1, 5], [8, 9, 0], [100, 2, 7]):  # shuffled rows (the Store checks sorted ones)
        with pytest.raises(IndexError):
            Plan(np.array(rows, dtype=np.int64), starts)
