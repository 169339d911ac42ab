"""Stores read from a real S3-protocol server on loopback: URLs, the local cache, the loader."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, StoreError

ROWS = 4000


def _columns(n: int = ROWS) -> dict[str, object]:
    rng = np.random.default_rng(3)
    return {
        "x": np.arange(n, dtype=np.int64),
        "v": rng.random((n, 16)).astype(np.float32),
        "ids": [np.arange(int(k), dtype=np.int32) for k in rng.integers(0, 9, size=n)],
        "text": [f"row {i}" for i in range(n)],
    }


@pytest.fixture
def remote_store(s3):
    """A store of ROWS rows in 16 KiB shards (about 20 of them) at s3://BUCKET/store."""
    url = f"s3://{s3.bucket()}/store"
    stoker.write(url, _columns(), shard_size="16KB")
    return url


def _cached_bytes(cache_dir: Path) -> int:
    """Bytes of shard files (and downloads) in the cache now; a file evicted while listed counts 0."""
    total = 0
    for p in cache_dir.rglob("*.arrow*"):
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


def test_a_url_is_never_written_as_a_local_directory(s3, tmp_path, monkeypatch):
    # before issue 18, stoker.write("s3://bucket/store") made a directory named "s3:" here
    monkeypatch.chdir(tmp_path)
    bucket = s3.bucket()
    stoker.write(f"s3://{bucket}/store", {"x": np.arange(10)})
    stoker.write(Path(f"s3://{bucket}/again"), {"x": np.arange(10)})  # pathlib folds it to s3:/bucket/again
    assert list(tmp_path.iterdir()) == []
    keys = {o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert {"store/manifest.json", "again/manifest.json"} <= keys
    assert stoker.open(f"s3://{bucket}/store", cache_dir=tmp_path / "c")[:]["x"].tolist() == list(range(10))


def test_an_unknown_scheme_is_refused_not_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="nosuch://"):
        stoker.write("nosuch://bucket/store", {"x": np.arange(3)})
    with pytest.raises(ConfigError, match="nosuch://"):
        stoker.open("nosuch://bucket/store")
    assert list(tmp_path.iterdir()) == []


def test_every_row_reads_back_as_written(s3, remote_store, tmp_path):
    local = stoker.write(tmp_path / "local", _columns(), shard_size="16KB")
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", storage_options=s3.options())
    want = stoker.open(local)
    assert len(ds) == ROWS and ds.num_shards == want.num_shards > 10
    got, exp = ds[:], want[:]
    assert np.array_equal(got["x"], exp["x"]) and np.array_equal(got["v"], exp["v"])
    assert got["text"] == exp["text"]
    assert np.array_equal(got["ids"].values, exp["ids"].values)
    assert repr(ds).startswith(f"Store('{remote_store}'")


def test_the_loader_takes_a_url_and_reads_each_row_once(remote_store, tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    seen = []
    for batch in stoker.Loader(remote_store, batch_size=128, shuffle="block", columns=["x"]):
        seen.append(batch["x"].numpy())
    assert sorted(np.concatenate(seen).tolist()) == list(range(ROWS))
    assert (tmp_path / "cache").is_dir()


def test_the_first_batch_comes_before_the_whole_store_is_fetched(s3, tmp_path):
    url = f"s3://{s3.bucket()}/wide"  # 4 MiB in 64 KiB shards: an epoch is many chunks of about 1 MiB
    n = 16000
    stoker.write(url, {"x": np.arange(n), "v": np.zeros((n, 62), dtype=np.float32)}, shard_size="64KB")
    ds = stoker.open(url, cache_dir=tmp_path / "cache")
    loader = stoker.Loader(ds, batch_size=1000, num_workers=0)
    it = iter(loader)
    first = next(it)
    fetched = ds.remote_stats()["shards_fetched"]
    assert first["x"].tolist() == list(range(1000))
    assert 1 <= fetched < ds.num_shards // 2
    rest = [b["x"] for b in it]
    assert sum(len(b) for b in rest) + 1000 == n
    assert ds.remote_stats()["shards_fetched"] == ds.num_shards
    assert not list((tmp_path / "cache").rglob("*.part-*"))  # no partial download left, none counted


def test_the_cache_stays_under_its_limit_and_evicts_least_recently_used(remote_store, tmp_path):
    probe = stoker.open(remote_store, cache_dir=tmp_path / "probe")
    biggest = max(s.bytes for s in probe.manifest.shards)
    limit = 3 * biggest
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit=limit)
    seen = []
    for batch in stoker.Loader(ds, batch_size=100, shuffle="block", block_size=200, window=2, columns=["x"]):
        seen.append(batch["x"].numpy())
        assert _cached_bytes(tmp_path / "cache") <= limit
    assert sorted(np.concatenate(seen).tolist()) == list(range(ROWS))
    stats = ds.remote_stats()
    assert stats["evicted"] > 0 and stats["shards_fetched"] >= ds.num_shards


def test_a_cache_limit_below_one_shard_is_an_error_naming_cache_dir_and_size(remote_store, tmp_path):
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit="4KB")
    with pytest.raises(StoreError, match="cache_limit") as info:
        ds[0]
    assert str(tmp_path / "cache") in str(info.value) and "KiB" in str(info.value)


def test_a_bad_cache_limit_is_a_config_error(remote_store, tmp_path):
    with pytest.raises(ConfigError, match="cache_limit"):
        stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit="lots")


def test_a_remote_store_pickles_and_reopens_with_its_options(s3, remote_store, tmp_path):
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", storage_options=s3.options())
    view = ds.select([5, 3000])
    again = pickle.loads(pickle.dumps(view))
    assert again[:]["x"].tolist() == [5, 3000]
    assert again.remote_stats()["cache_dir"] == ds.remote_stats()["cache_dir"]


_READER = """
import sys, json, stoker
ds = stoker.open(sys.argv[1], cache_dir=sys.argv[2])
total = int(ds[:]["x"].sum())
print(json.dumps({"fetched": ds.remote_stats()["shards_fetched"], "total": total}))
"""


def test_processes_sharing_a_cache_download_each_shard_once(remote_store, tmp_path):
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READER, remote_store, str(tmp_path / "cache")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for _ in range(3)
    ]
    import json

    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    shards = stoker.open(remote_store, cache_dir=tmp_path / "cache").num_shards
    assert all(r["total"] == ROWS * (ROWS - 1) // 2 for r in results)
    assert sum(r["fetched"] for r in results) == shards  # three readers, one download per shard


def test_loader_report_counts_what_was_fetched(remote_store, tmp_path):
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache")
    loader = stoker.Loader(ds, batch_size=256, shuffle=True, columns=["x"])
    assert sum(len(b["x"]) for b in loader) == ROWS
    report = loader.report()
    assert report["shards_fetched"] == ds.num_shards and report["bytes_fetched"] == report["store_bytes"]
    assert sum(len(b["x"]) for b in loader) == ROWS  # the second epoch reads the cache
    assert loader.report()["shards_fetched"] == ds.num_shards


def test_process_workers_read_a_remote_store(remote_store, tmp_path):
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache")
    loader = stoker.Loader(ds, batch_size=500, engine="processes", num_workers=2, columns=["x"])
    assert sorted(np.concatenate([b["x"].numpy() for b in loader]).tolist()) == list(range(ROWS))


def test_a_shard_held_by_a_gather_stays_valid_when_its_file_is_evicted(remote_store, tmp_path):
    probe = stoker.open(remote_store, cache_dir=tmp_path / "probe")
    biggest = max(s.bytes for s in probe.manifest.shards)
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit=biggest + biggest // 2)
    got = ds[:]  # one gather over every shard: each arrival evicts the one before, still held by the gather
    assert got["x"].tolist() == list(range(ROWS)) and got["text"] == [f"row {i}" for i in range(ROWS)]
    assert ds.remote_stats()["evicted"] >= ds.num_shards // 2
    assert _cached_bytes(tmp_path / "cache") <= biggest + biggest // 2


def test_a_shard_fetched_ahead_and_not_read_yet_is_evicted_after_the_shards_read(remote_store, tmp_path):
    probe = stoker.open(remote_store, cache_dir=tmp_path / "probe")
    starts = np.concatenate([[0], np.cumsum([s.rows for s in probe.manifest.shards])])
    ds = stoker.open(
        remote_store, cache_dir=tmp_path / "cache", cache_limit=3 * max(s.bytes for s in probe.manifest.shards)
    )
    ahead, b, c, d = 5, 1, 2, 3  # shard numbers
    ds.prefetch(np.array([starts[ahead]]))  # shard 5 fetched ahead of its read
    deadline = time.monotonic() + 120  # a download on a loaded machine: a bound, not a timing
    while ds.remote_stats()["shards_fetched"] < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ds[int(starts[b])]["x"] == starts[b] and ds[int(starts[c])]["x"] == starts[c]  # the cache is full
    assert ds[int(starts[d])]["x"] == starts[d]  # room made: shard 1 (read, least recently used) goes, not shard 5
    stats = ds.remote_stats()
    assert stats["evicted"] == 1 and stats["shards_fetched"] == 4
    assert ds[int(starts[ahead])]["x"] == starts[ahead]
    assert ds.remote_stats()["shards_fetched"] == 4  # read from the cache: it was not evicted
