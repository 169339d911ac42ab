"""A remote store's shards are fetched a chunk ahead of the reads in flight (``BatchSource.upcoming``)."""

from __future__ import annotations

import time

import numpy as np

import stoker


def _shards_of(ds: stoker.Store, last_row: int) -> int:
    """How many shards (from the first) rows 0..last_row lie in."""
    ends = np.cumsum([s.rows for s in ds.manifest.shards])
    return int(np.searchsorted(ends, last_row, side="right")) + 1


def test_shards_of_batches_not_yet_in_flight_are_fetched_before_they_are_read(s3, tmp_path):
    url = f"s3://{s3.bucket()}/ahead"  # 4 MiB in 64 KiB shards; batches of 1000 rows (~250 KiB): 4 per chunk
    n = 16000
    stoker.write(url, {"x": np.arange(n), "v": np.zeros((n, 62), dtype=np.float32)}, shard_size="64KB")
    ds = stoker.open(url, cache_dir=tmp_path / "cache")
    loader = stoker.Loader(ds, batch_size=1000, num_workers=0)  # inline: one task (chunk) in flight at a time
    it = iter(loader)
    first = next(it)  # the first chunk is batch 0 (rows 0-999); batches 1-4 (rows 1000-4999) are one chunk ahead
    assert first["x"].tolist() == list(range(1000))
    own, ahead = _shards_of(ds, 999), _shards_of(ds, 4999)
    assert own < ahead < ds.num_shards // 2
    deadline = time.monotonic() + 120  # downloads on a loaded machine: a bound, not a timing
    while ds.remote_stats()["shards_fetched"] < ahead and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ds.remote_stats()["shards_fetched"] == ahead  # batch 1 is not read yet: fetched ahead of its read
    rest = [b["x"] for b in it]
    assert np.concatenate([first["x"], *rest]).tolist() == list(range(n))
    stats = ds.remote_stats()
    assert stats["shards_fetched"] == ds.num_shards  # each shard downloaded once


def _shards_of_rows(ds: stoker.Store, rows: np.ndarray) -> set[int]:
    ends = np.cumsum([s.rows for s in ds.manifest.shards])
    return set(np.searchsorted(ends, rows, side="right").tolist())


def test_block_order_fetches_the_next_windows_shards_while_this_window_is_read(s3, tmp_path):
    # 24 MiB in 64 KiB shards (256 rows each); batches of 1000 rows (~250 KiB): 4 per chunk; three windows of
    # 32 blocks of 1000 rows: 32 batches each, announced 16 batches ahead
    url = f"s3://{s3.bucket()}/windows"
    n = 96000
    stoker.write(url, {"x": np.arange(n), "v": np.zeros((n, 62), dtype=np.float32)}, shard_size="64KB")
    ds = stoker.open(url, cache_dir=tmp_path / "cache")
    loader = stoker.Loader(ds, batch_size=1000, shuffle="block", block_size=1000, window=32, num_workers=0, seed=3)
    planned = list(loader.batch_sampler.batches_from(0, 0))
    it = iter(loader)
    got = [next(it)["x"] for _ in range(21)]  # batches 0-20: the chunk of batches 19-22 is read (inline)
    window0 = _shards_of_rows(ds, np.concatenate(planned[:32]))
    wanted = window0 | _shards_of_rows(ds, planned[32])  # 22 + 16 batches announced: batch 32 starts window 1
    assert len(window0) < len(wanted) < ds.num_shards
    deadline = time.monotonic() + 120  # downloads on a loaded machine: a bound, not a timing
    while ds.remote_stats()["shards_fetched"] < len(wanted) and time.monotonic() < deadline:
        time.sleep(0.05)
    # window 1's shards, before any batch of window 1 is read (one chunk ahead, 22 + 4: window 0's alone)
    assert ds.remote_stats()["shards_fetched"] >= len(wanted)
    got += [b["x"] for b in it]
    assert [sorted(b.tolist()) for b in got] == [sorted(p.tolist()) for p in planned]
    assert ds.remote_stats()["shards_fetched"] == ds.num_shards  # each shard downloaded once
