"""The remote shard cache on a machine shared with other users (issue 36, items 3, 4 and 7).

A cache directory others can reach must never make stoker write outside it (links planted at the
names it writes), hand back bytes that are not the store's (a planted shard of the right size), or
stay full of what a killed download left. Stores are read through fsspec (``memory://``) and
through obstore from a real S3-protocol server on loopback (``moto[server]``).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import ShardError, StoreError

ROWS = 2000


@pytest.fixture(scope="module")
def s3_options():
    """storage_options reaching a moto S3 server on loopback, with one bucket ``cache``."""
    moto = pytest.importorskip("moto.server", reason="needs moto[server] (dev extra)")
    boto3 = pytest.importorskip("boto3", reason="needs boto3 (installed with moto)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = moto.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = {"key": "stokerkey", "secret": "stoker-secret-0123", "endpoint_url": f"http://127.0.0.1:{port}"}
    options["client_kwargs"] = {"region_name": "us-east-1"}
    boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        aws_access_key_id="k",
        aws_secret_access_key="s",
        region_name="us-east-1",
    ).create_bucket(Bucket="cache")
    yield options
    server.stop()


def _write(url: str, options: dict | None = None) -> dict:
    """A store of ROWS rows in several shards at ``url``; its columns."""
    rng = np.random.default_rng(3)
    cols = {"x": np.arange(ROWS, dtype=np.int64), "v": rng.random((ROWS, 8)).astype(np.float32)}
    stoker.write(url, cols, shard_size="16KB", storage_options=options)
    return cols


@pytest.fixture
def store():
    """``(url, storage_options, columns)`` of a store in fsspec's memory filesystem."""
    url = f"memory://cache-{uuid.uuid4().hex[:10]}/st"
    return url, None, _write(url)


@pytest.fixture(params=["fsspec", "obstore"])
def any_store(request, store, s3_options):
    """The store read through each fetcher: fsspec (memory://) and obstore (s3:// on moto)."""
    if request.param == "fsspec":
        return store
    pytest.importorskip("obstore", reason="needs obstore: pip install 'stoker[remote]'")
    url = f"s3://cache/{uuid.uuid4().hex[:10]}"
    return url, s3_options, _write(url, s3_options)


def _layout(url: str, options: dict | None, tmp_path: Path) -> tuple[str, list[str]]:
    """The name of the store's directory in a cache, and its shard files (learned from a cache of its own)."""
    ds = stoker.open(url, cache_dir=tmp_path / "probe", storage_options=options)
    return Path(ds.remote_stats()["cache_dir"]).name, [s.file for s in ds.manifest.shards]


def _same(ds, cols: dict) -> None:
    got = ds[:]
    assert got["x"].tolist() == cols["x"].tolist()
    assert np.array_equal(np.asarray(got["v"]), cols["v"])


def _dead_pid() -> int:
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(out.stdout)


def test_links_planted_where_a_download_writes_are_never_written_through(any_store, tmp_path):
    """The old names (``<shard>.part-<pid>``, ``manifest.json.part-<pid>``, ``.cache.size.<pid>``) were opened with
    O_CREAT|O_TRUNC: links planted there truncated and overwrote files outside the cache."""
    url, options, cols = any_store
    key, shards = _layout(url, options, tmp_path)
    directory = tmp_path / "cache" / key
    directory.mkdir(parents=True, mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    pid = os.getpid()
    names = [f"{s}.part-{pid}" for s in shards] + [f"manifest.json.part-{pid}", f".cache.size.{pid}"]
    for i, name in enumerate(names):
        (outside / f"victim-{i}").write_bytes(b"precious")
        (directory / name).symlink_to(outside / f"victim-{i}")
    try:
        _same(stoker.open(url, cache_dir=tmp_path / "cache", storage_options=options), cols)
    finally:
        assert [p.read_bytes() for p in sorted(outside.iterdir())] == [b"precious"] * len(names)


@pytest.mark.parametrize("where", ["cache lock", "shard lock", "store directory"])
def test_a_link_where_the_cache_opens_a_file_is_a_store_error_naming_it(store, tmp_path, where):
    """A dangling link at a lock file's name made a file outside the cache (O_CREAT without O_NOFOLLOW); a link in
    place of the store's directory put the whole cache outside it."""
    url, options, _ = store
    key, shards = _layout(url, options, tmp_path)
    directory = tmp_path / "cache" / key
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    if where == "store directory":
        directory.parent.mkdir()
        directory.symlink_to(outside, target_is_directory=True)
        name = key
    else:
        directory.mkdir(parents=True, mode=0o700)
        name = ".cache.lock" if where == "cache lock" else f"{shards[0]}.lock"
        (directory / name).symlink_to(outside / "made-through-the-link")
    with pytest.raises(StoreError, match=f"{name}.* symbolic link") as caught:
        stoker.open(url, cache_dir=tmp_path / "cache", storage_options=options)[:]
    assert caught.value.path == directory / name if where != "store directory" else directory
    assert list(outside.iterdir()) == []


def test_the_default_cache_is_private_to_its_user(store, tmp_path, monkeypatch):
    url, options, cols = store
    monkeypatch.delenv("STOKER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    ds = stoker.open(url, storage_options=options)
    _same(ds, cols)
    root = tmp_path / "xdg" / "stoker"
    assert Path(ds.remote_stats()["cache_dir"]).parent == root
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(ds.remote_stats()["cache_dir"]).stat().st_mode) == 0o700


@pytest.mark.parametrize("kind", ["group-writable", "world-writable", "another user's"])
def test_a_cache_dir_others_can_write_to_is_refused_saying_what_to_do(store, tmp_path, monkeypatch, kind):
    url, options, _ = store
    shared = tmp_path / "shared"
    shared.mkdir()
    if kind == "another user's":
        if os.geteuid() == 0:
            os.chown(shared, 65534, 65534)  # nobody
        else:
            shared = Path("/")  # root's, writable by no one else
        advice = "belongs to another user.*use a directory of your own"
    else:
        os.chmod(shared, 0o775 if kind == "group-writable" else 0o1777)
        advice = f"writable by other users.*chmod 700 {shared}"
    monkeypatch.setenv("STOKER_CACHE_DIR", str(shared))
    with pytest.raises(StoreError, match=advice):
        stoker.open(url, storage_options=options)
    if shared != Path("/"):
        assert list(shared.iterdir()) == []


def test_a_planted_shard_of_the_right_size_is_not_read_as_data(store, tmp_path):
    """A cached shard was trusted by its size alone: other bytes of the same size were read as the store's."""
    url, options, cols = store
    ds = stoker.open(url, cache_dir=tmp_path / "cache", storage_options=options)
    _same(ds, cols)
    directory = Path(ds.remote_stats()["cache_dir"])
    victim = directory / ds.manifest.shards[1].file
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # a value in a column; the file is still valid Arrow
    planted = tmp_path / "planted"
    planted.write_bytes(raw)
    os.replace(planted, victim)
    again = stoker.open(url, cache_dir=tmp_path / "cache", storage_options=options)
    with pytest.raises(ShardError, match=f"{victim}.*altered in the cache"):
        again[:]
    assert not victim.exists()  # deleted: the next read fetches it anew
    _same(again, cols)
    _same(again, cols)
    # each file found in the cache was checked once, at its first map; the one fetched again, on arrival
    assert again.remote_stats()["cache_checked"] == ds.num_shards - 1
    assert again.remote_stats()["shards_fetched"] == 1


def test_what_a_killed_download_left_is_swept_when_the_cache_is_opened(store, tmp_path):
    """A dead process's ``.part`` file and reservation counted against cache_limit for good: the next reader waited,
    then said "cache_dir is full ... raise cache_limit (to at least 1.0 MiB)" with a limit of 1 MiB."""
    url, options, cols = store
    key, shards = _layout(url, options, tmp_path)
    directory = tmp_path / "cache" / key
    directory.mkdir(parents=True, mode=0o700)
    dead, limit = _dead_pid(), 2**20
    (directory / f"{shards[0]}.part-{dead}").write_bytes(bytes(limit // 2))  # the old name
    (directory / f"{shards[1]}.part-{dead}-0123456789ab").write_bytes(bytes(limit // 4))
    (directory / f"manifest.json.part-{dead}-0123456789ab").write_bytes(b"{")
    live = directory / f"{shards[2]}.part-{os.getpid()}-0123456789ab"  # a download of a process that runs
    live.write_bytes(b"")
    reserved = {f"{shards[3]}.part-{dead}": limit // 2}
    (directory / ".cache.size").write_text(json.dumps({"cached": 0, "reserved": reserved}))
    ds = stoker.open(url, cache_dir=tmp_path / "cache", cache_limit=limit, storage_options=options)
    assert sorted(p.name for p in directory.glob("*.part-*")) == [live.name]
    assert json.loads((directory / ".cache.size").read_text()) == {"cached": 0, "reserved": {}}
    _same(ds, cols)
    assert ds.remote_stats()["evicted"] == 0
