"""A shuffled batch over several shards in one ``np.take`` (``store/gather.py:take_across``): every
row where the sampler put it, for rows of any size, repeated rows included; where it cannot apply
(a strided array, a row past its shard's end) it does nothing and the per-shard path runs."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.store.gather import Plan, gather_tensor, take_across

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


def _sources(ds, name):
    return {s: ds._cache.get(s).columns[name].data for s in range(len(ds.manifest.shards))}


def test_rows_of_every_size_land_in_the_samplers_order(store):
    path, cols = store
    ds = stoker.open(path)
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.permutation(N)[:150], [7, 7, N - 1, 0]])  # repeated rows too
    for name, col in cols.items():
        plan = Plan(rows, ds._starts)
        out = np.empty((len(rows), *col.shape[1:]), col.dtype)
        assert take_across(_sources(ds, name), plan, out), name
        assert np.array_equal(out, col[rows]), name
        assert np.array_equal(ds.gather(rows, [name])[name], col[rows]), name


def test_it_steps_aside_where_it_cannot_apply_and_the_gather_is_still_right(store):
    path, cols = store
    ds = stoker.open(path)
    rows = np.random.default_rng(1).permutation(N)[:100]
    plan = Plan(rows, ds._starts)
    want = cols["xyz"][rows]
    strided = {s: np.asfortranarray(a) for s, a in _sources(ds, "xyz").items()}  # not C-contiguous
    short = {s: a[:1] for s, a in _sources(ds, "xyz").items()}  # rows past each shard's end
    for sources in (strided, short):
        out = np.full_like(want, -1.0)
        assert not take_across(sources, plan, out)
        assert (out == -1.0).all()  # nothing written
    out = np.empty_like(want)
    gather_tensor({s: type("V", (), {"data": a})() for s, a in strided.items()}, plan, out)
    assert np.array_equal(out, want)
