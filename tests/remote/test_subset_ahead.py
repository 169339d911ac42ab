"""A ``stoker.Subset`` of a remote store's source forwards the look-ahead (``BatchSource.upcoming``):
the shards of the parent rows of batches not yet in flight are fetched before they are read."""

from __future__ import annotations

import time

import numpy as np

import stoker
from stoker.pipeline.store_source import StoreSource


def _shards(ds: stoker.Store, rows: np.ndarray) -> set[int]:
    ends = np.cumsum([s.rows for s in ds.manifest.shards])
    return set(np.searchsorted(ends, rows, side="right").tolist())


def test_a_subset_fetches_the_shards_of_its_parent_rows_ahead(s3, tmp_path):
    url = f"s3://{s3.bucket()}/subset"  # 4 MiB in 64 KiB shards; batches of 1000 rows (~250 KiB): 4 per chunk
    n = 16000
    stoker.write(url, {"x": np.arange(n), "v": np.zeros((n, 62), dtype=np.float32)}, shard_size="64KB")
    ds = stoker.open(url, cache_dir=tmp_path / "cache")
    parent = np.arange(n)[::-1].copy()  # the subset reads the store backwards: its first rows are the last shards
    subset = stoker.Subset(StoreSource(ds), parent)
    loader = stoker.Loader(subset, batch_size=1000, num_workers=0)  # inline: one task (chunk) in flight at a time
    it = iter(loader)
    first = next(it)  # the first chunk is batch 0; batches 1-4 are announced one chunk ahead
    assert sorted(first["x"].tolist()) == sorted(parent[:1000].tolist())  # a batch's rows come in storage order
    own, ahead = _shards(ds, parent[:1000]), _shards(ds, parent[:5000])
    assert len(own) < len(ahead) < ds.num_shards // 2
    deadline = time.monotonic() + 120  # downloads on a loaded machine: a bound, not a timing
    while ds.remote_stats()["shards_fetched"] < len(ahead) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ds.remote_stats()["shards_fetched"] == len(ahead)  # batch 1 is not read yet: fetched ahead of its read
    rest = [b["x"] for b in it]
    assert [sorted(b.tolist()) for b in [first["x"], *rest]] == [
        sorted(parent[k : k + 1000]) for k in range(0, n, 1000)
    ]
    assert ds.remote_stats()["shards_fetched"] == ds.num_shards  # each shard downloaded once
