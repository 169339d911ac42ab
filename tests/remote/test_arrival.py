"""A shard's checksum is taken as its bytes arrive, and its cache file is laid out as a local store's.

On a real loopback S3 server, through obstore (the default client for ``s3://``).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import stoker
from stoker.remote import obstore_fetcher as objects
from stoker.store import shardfile

pytestmark = pytest.mark.usefixtures("obstore_client")


def test_a_downloaded_shard_is_checked_without_reading_its_file_back(s3, tmp_path, monkeypatch):
    url = f"s3://{s3.bucket()}/st"
    n = 3000
    stoker.write(url, {"x": np.arange(n), "v": np.zeros((n, 30), dtype=np.float32)}, shard_size="64KB")
    ds = stoker.open(url, cache_dir=tmp_path)

    def read_back(*args, **kwargs):
        raise AssertionError("a downloaded shard was read back to take its checksum")

    monkeypatch.setattr(shardfile, "file_checksum", read_back)  # what shard_problem reads a file with
    rows = np.concatenate([b["x"].numpy() for b in stoker.Loader(ds, batch_size=500, shuffle=True)])
    assert sorted(rows.tolist()) == list(range(n))
    assert ds.remote_stats()["shards_fetched"] == ds.num_shards > 1


def test_pieces_are_written_one_aligned_block_per_write(tmp_path, monkeypatch):
    monkeypatch.setattr(objects, "BLOCK", 16)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    sizes: list[tuple[int, int]] = []
    real_write = os.write
    at = [0]

    def write(f, view):
        n = real_write(f, view)
        sizes.append((at[0], n))
        at[0] += n
        return n

    monkeypatch.setattr(objects.os, "write", write)
    seen: list[bytes] = []
    out = objects._AlignedWrites(fd, lambda v: seen.append(bytes(v)))
    data = bytes(range(100))
    for a, b in [(0, 5), (5, 7), (7, 40), (40, 41), (41, 100)]:  # network pieces of odd sizes
        out.add(memoryview(data[a:b]))
    out.flush()
    os.close(fd)
    assert (tmp_path / "f").read_bytes() == data and b"".join(seen) == data
    # every write starts at a block boundary and is whole blocks, but the file's short last block
    assert all(start % 16 == 0 for start, _ in sizes)
    assert all(n % 16 == 0 for _, n in sizes[:-1]) and sizes[-1] == (96, 4)
