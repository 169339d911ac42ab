"""The cache's running total (``.cache.size``): a download that fits lists no directory, and the total stays right.

Against the real S3-protocol server of conftest.py; the processes sharing a cache are real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stoker

ROWS = 4000


@pytest.fixture
def remote_store(s3):
    """ROWS rows in 16 KiB shards (about 20 of them) at s3://BUCKET/store."""
    url = f"s3://{s3.bucket()}/store"
    rng = np.random.default_rng(5)
    stoker.write(
        url, {"x": np.arange(ROWS, dtype=np.int64), "v": rng.random((ROWS, 16)).astype(np.float32)}, shard_size="16KB"
    )
    return url


def _cache(cache_dir: Path) -> Path:
    (directory,) = [p for p in cache_dir.iterdir() if p.is_dir()]
    return directory


def _on_disk(directory: Path) -> int:
    """Bytes of whole shard files in the cache now; a file evicted while listed counts 0."""
    total = 0
    for p in directory.glob("*.arrow"):
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


def _total(directory: Path) -> dict:
    return json.loads((directory / ".cache.size").read_text())


def test_a_download_that_fits_lists_no_directory(remote_store, tmp_path, monkeypatch):
    listed = []
    scandir = os.scandir

    def counting(path="."):  # every listing of the cache directory, by any thread of this process
        if Path(path).parent == tmp_path / "cache":
            listed.append(path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit="1GB")
    assert ds[:]["x"].tolist() == list(range(ROWS))
    assert ds.num_shards >= 10 and ds.remote_stats()["shards_fetched"] == ds.num_shards
    assert len(listed) <= 1  # once, to start the total; before: once per download
    assert ds.remote_stats()["cache_rescans"] == len(listed)
    directory = _cache(tmp_path / "cache")
    assert _total(directory) == {"cached": _on_disk(directory), "reserved": {}}


def test_the_total_follows_evictions_and_stays_under_the_limit(remote_store, tmp_path):
    probe = stoker.open(remote_store, cache_dir=tmp_path / "probe")
    limit = 3 * max(s.bytes for s in probe.manifest.shards)
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit=limit)
    directory = None
    seen = 0
    for batch in stoker.Loader(ds, batch_size=100, shuffle="block", block_size=200, window=2, columns=["x"]):
        seen += len(batch["x"])
        directory = directory or _cache(tmp_path / "cache")
        total = _total(directory)
        assert total["cached"] + sum(total["reserved"].values()) <= limit
        assert _on_disk(directory) <= limit
    assert seen == ROWS and ds.remote_stats()["evicted"] > 0
    assert _total(directory) == {"cached": _on_disk(directory), "reserved": {}}


def test_a_lost_or_stale_total_is_counted_again_from_the_directory(remote_store, tmp_path):
    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache", cache_limit="1GB")
    ds[:10]
    directory = _cache(tmp_path / "cache")
    (directory / ".cache.size").write_text("not json")  # unreadable: listed again
    ds[1000:1010]
    assert _total(directory) == {"cached": _on_disk(directory), "reserved": {}}
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = f"shard-999999.arrow.part-{int(dead.stdout)}"
    # a process that died mid-download left its reservation: it fills the limit until an eviction looks
    (directory / ".cache.size").write_text(json.dumps({"cached": _on_disk(directory), "reserved": {gone: 2**30}}))
    assert ds[:]["x"].tolist() == list(range(ROWS))
    assert _total(directory) == {"cached": _on_disk(directory), "reserved": {}}


_READER = """
import json, sys, stoker
ds = stoker.open(sys.argv[1], cache_dir=sys.argv[2], cache_limit=int(sys.argv[3]))
order = list(range(ds.num_shards))
if sys.argv[4] == "backward":
    order.reverse()
total = 0
for _ in range(3):
    for shard in order:
        start = sum(s.rows for s in ds.manifest.shards[:shard])
        total += int(ds[start : start + ds.manifest.shards[shard].rows]["x"].sum())
print(json.dumps({"total": total, "evicted": ds.remote_stats()["evicted"]}))
"""


def test_two_processes_adding_and_evicting_agree_on_the_total(remote_store, tmp_path):
    probe = stoker.open(remote_store, cache_dir=tmp_path / "probe")
    limit = 4 * max(s.bytes for s in probe.manifest.shards)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _READER, remote_store, str(tmp_path / "cache"), str(limit), order],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for order in ("forward", "backward")
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["total"] == 3 * ROWS * (ROWS - 1) // 2 for r in results)
    assert all(r["evicted"] > 0 for r in results)  # both added and evicted
    directory = _cache(tmp_path / "cache")
    assert _total(directory) == {"cached": _on_disk(directory), "reserved": {}}
    assert _on_disk(directory) <= limit
    assert not list(directory.glob("*.part-*"))


def test_verify_deleting_an_altered_shard_takes_it_off_the_total(remote_store, tmp_path):
    """verify() deleted a cached shard whose bytes were altered but left its bytes in the total, which
    then overcounted until an eviction's listing set it right."""
    from stoker.errors import ShardError

    ds = stoker.open(remote_store, cache_dir=tmp_path / "cache")
    ds.gather(np.arange(ROWS), ["x"])  # every shard cached
    directory = _cache(tmp_path / "cache")
    assert _total(directory)["cached"] == _on_disk(directory)
    victim = sorted(directory.glob("*.arrow"))[0]
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.write_bytes(raw)
    with pytest.raises(ShardError, match="altered in the cache"):
        ds.verify()
    assert not victim.exists()
    assert _total(directory) == {"cached": _on_disk(directory), "reserved": {}}
