"""A shard downloads as ranged GETs on block boundaries, a few at a time, each written straight from obstore's buffer.

On the real loopback S3 server of conftest.py, through obstore (the default client for ``s3://``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import stoker
from stoker.remote import obstore_fetcher as objects

pytestmark = pytest.mark.usefixtures("obstore_client")


def test_a_shard_arrives_in_aligned_ranges_with_no_copy(s3, tmp_path, monkeypatch):
    url = f"s3://{s3.bucket()}/st"
    v = np.random.default_rng(1).random((3000, 8))
    stoker.write(url, {"v": v}, shard_size="64KB")
    monkeypatch.setattr(objects, "BLOCK", 4096)
    monkeypatch.setattr(objects, "RANGE_BYTES", 3 * 4096)  # a shard of ~64 KB: ~6 ranges of 3 blocks
    writers: list[objects._AlignedWrites] = []
    writes: list[tuple[int, int]] = []
    real_init, real_write = objects._AlignedWrites.__init__, os.write

    def init(self, fd, seen):
        real_init(self, fd, seen)
        writers.append(self)

    def write(fd, view):
        n = real_write(fd, view)
        writes.append((os.lseek(fd, 0, os.SEEK_CUR) - n, n))
        return n

    import obstore

    asked: list[int] = []
    real_get_ranges = obstore.get_ranges

    def get_ranges(store, path, *, starts, ends, **kwargs):
        asked.append(len(starts))
        return real_get_ranges(store, path, starts=starts, ends=ends, **kwargs)

    monkeypatch.setattr(obstore, "get_ranges", get_ranges)
    monkeypatch.setattr(objects._AlignedWrites, "__init__", init)
    monkeypatch.setattr(objects.os, "write", write)
    ds = stoker.open(url, cache_dir=tmp_path)
    np.testing.assert_array_equal(ds[:]["v"], v)
    assert ds.remote_stats()["shards_fetched"] == ds.num_shards == len(writers) > 1
    assert sum(w.copied for w in writers) == 0  # before: a streamed GET's pieces all copied into blocks
    assert writes and all(start % 4096 == 0 for start, _ in writes)
    assert max(asked) == objects.RANGES_AT_ONCE  # a large shard is never whole in memory
