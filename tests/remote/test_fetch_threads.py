"""The background downloads of a remote store run on threads that end once nothing is queued:
an opened store that is still referenced (or never closed) keeps no idle threads alive."""

from __future__ import annotations

import threading

import numpy as np

import stoker


def _fetchers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stoker-fetch")]


def test_fetch_threads_end_when_the_downloads_are_done(s3, tmp_path):
    url = f"s3://{s3.bucket()}/threads"
    n = 4000
    stoker.write(url, {"x": np.arange(n), "v": np.zeros((n, 62), dtype=np.float32)}, shard_size="64KB")
    ds = stoker.open(url, cache_dir=tmp_path / "cache")
    loader = stoker.Loader(ds, batch_size=500, shuffle=True, num_workers=0)
    rows = np.concatenate([b["x"].numpy() for b in loader])
    assert sorted(rows.tolist()) == list(range(n))
    assert ds.remote_stats()["shards_fetched"] == ds.num_shards  # the shards came through the background fetch
    for t in _fetchers():
        t.join(timeout=60)  # a bound on a loaded machine, not a timing: they have nothing left to do
    assert _fetchers() == []  # with a thread pool, 4 idle threads stayed for as long as `ds` lived
    assert len(ds) == n  # `ds` is still referenced here
