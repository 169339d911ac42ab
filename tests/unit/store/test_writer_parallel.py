"""StoreWriter.reserve_shard / commit_shard: shards written on the caller's threads, recorded in order."""

from __future__ import annotations

import concurrent.futures as cf
import os

import numpy as np
import pytest

import stoker
from stoker.errors import SchemaError
from stoker.store.writer import StoreWriter

SCHEMA = {"x": stoker.Tensor("float32", (4,)), "y": stoker.Scalar("int64")}


def slabs(n: int, step: int):
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    y = np.arange(n, dtype=np.int64) * 3
    return x, y, [(a, {"x": x[a : a + step], "y": y[a : a + step]}) for a in range(0, n, step)]


def test_shards_written_on_threads_out_of_order_are_recorded_in_order(tmp_path):
    x, y, parts = slabs(1000, 90)
    with StoreWriter(tmp_path / "s", SCHEMA) as w:
        tasks = [w.reserve_shard() for _ in parts]
        with cf.ThreadPoolExecutor(4) as pool:  # finish in reverse order: the commit order is the reservation order
            futures = [pool.submit(t.write, cols, a) for t, (a, cols) in zip(tasks[::-1], parts[::-1])]
            cf.wait(futures)
        for t in tasks:
            w.commit_shard(t)
        assert w.rows_written == 1000
    ds = stoker.open(tmp_path / "s", verify=True)
    assert ds.num_shards == len(parts)
    assert [s.rows for s in ds.manifest.shards] == [len(c["y"]) for _, c in parts]
    np.testing.assert_array_equal(ds[:]["x"], x)
    np.testing.assert_array_equal(ds[:]["y"], y)


def test_rows_added_before_a_reservation_come_first(tmp_path):
    with StoreWriter(tmp_path / "s", SCHEMA) as w:
        w.add({"x": np.zeros(4, np.float32), "y": 7})
        t = w.reserve_shard()
        w.commit_shard(t.write({"x": np.ones((2, 4), np.float32), "y": np.array([8, 9])}, 1))
    assert stoker.open(tmp_path / "s")[:]["y"].tolist() == [7, 8, 9]


def test_misuse_is_refused_and_leaves_no_store(tmp_path):
    w = StoreWriter(tmp_path / "s", SCHEMA)
    a, b = w.reserve_shard(), w.reserve_shard()
    b.write({"x": np.ones((2, 4), np.float32), "y": np.arange(2)})
    with pytest.raises(RuntimeError, match="order reserved"):
        w.commit_shard(b)
    with pytest.raises(RuntimeError, match="not written"):
        w.commit_shard(a)
    with pytest.raises(SchemaError, match="do not match"):
        a.write({"x": np.ones((2, 4), np.float32)})
    with pytest.raises(SchemaError, match="different numbers of rows"):
        a.write({"x": np.ones((2, 4), np.float32), "y": np.arange(3)})
    w.add_batch({"x": np.ones((1, 4), np.float32), "y": np.arange(1)})
    with pytest.raises(RuntimeError, match="reserved shard"):
        w.close()
    assert not (tmp_path / "s").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".s.tmp")]


def test_reserve_needs_a_schema(tmp_path):
    with pytest.raises(SchemaError, match="schema"):
        StoreWriter(tmp_path / "s").reserve_shard()
