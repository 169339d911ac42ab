"""Faults of a remote store on a real loopback S3 server: missing things, bad objects, a server that goes away.

Each is a StokerError naming the URL and saying what to do, or a bounded retry that the store's
stats count; never a hang, never a short epoch.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

import stoker
from stoker.errors import ManifestError, ShardError, StokerError, StoreError, StoreNotFoundError

N = 2000


@pytest.fixture(autouse=True, params=["obstore", "fsspec"])
def client(request, monkeypatch):
    """Every fault test runs with each object client (STOKER_REMOTE_CLIENT)."""
    if request.param == "obstore":
        pytest.importorskip("obstore", reason="the obstore runs need obstore: pip install 'stoker[remote]'")
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", request.param)
    return request.param


@pytest.fixture
def stored(s3):
    """(bucket, url, manifest) of a store of N rows in several shards."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/st"
    stoker.write(url, {"x": np.arange(N, dtype=np.int64)}, shard_size="4KB")
    return bucket, url


@pytest.fixture
def wide(s3):
    """(bucket, url) of a store of 16,000 rows of 256 bytes in 64 KiB shards: an epoch reads many chunks."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/st"
    stoker.write(url, {"v": np.zeros((16000, 64), dtype=np.float32)}, shard_size="64KB")
    return bucket, url


def _shard_key(s3, bucket: str, url: str, k: int, tmp_path) -> str:
    info = stoker.open(url, cache_dir=tmp_path / "probe").manifest.shards[k]
    return f"st/{info.file}"


def test_a_missing_bucket_or_prefix_names_the_url(s3, tmp_path):
    with pytest.raises(StoreNotFoundError, match="s3://no-such-bucket-x/st") as info:
        stoker.open("s3://no-such-bucket-x/st", cache_dir=tmp_path)
    assert "bucket and the prefix" in str(info.value)
    bucket = s3.bucket()
    with pytest.raises(StoreNotFoundError, match=f"s3://{bucket}/nothing-here"):
        stoker.open(f"s3://{bucket}/nothing-here", cache_dir=tmp_path)


def test_a_manifest_that_is_not_json_is_a_manifest_error_naming_its_url(s3, stored, tmp_path):
    bucket, url = stored
    s3.client().put_object(Bucket=bucket, Key="st/manifest.json", Body=b"{not json")
    with pytest.raises(ManifestError, match=f"{url}/manifest.json"):
        stoker.open(url, cache_dir=tmp_path)


def test_an_altered_shard_is_fetched_again_then_refused_naming_its_url(s3, stored, tmp_path):
    bucket, url = stored
    key = _shard_key(s3, bucket, url, 1, tmp_path)
    body = bytearray(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-20] ^= 0xFF  # same size, other bytes
    s3.client().put_object(Bucket=bucket, Key=key, Body=bytes(body))
    ds = stoker.open(url, cache_dir=tmp_path / "c")
    with pytest.raises(ShardError, match=f"s3://{key.replace('st/', bucket + '/st/')}") as info:
        ds[:]
    assert "xxh3_128" in str(info.value) and "write the store" in str(info.value)
    assert ds.remote_stats()["checksum_retries"] == 1
    assert not list((tmp_path / "c").rglob(key.split("/")[-1]))  # never counted as cached


def test_an_object_truncated_mid_epoch_stops_the_epoch_with_an_error(s3, wide, tmp_path):
    bucket, url = wide
    ds = stoker.open(url, cache_dir=tmp_path / "c")
    last = ds.num_shards - 1
    key = f"st/{ds.manifest.shards[last].file}"
    it = iter(stoker.Loader(ds, batch_size=1000, num_workers=0))
    next(it)
    body = s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.client().put_object(Bucket=bucket, Key=key, Body=body[: len(body) // 2])
    with pytest.raises(ShardError, match="bytes where the manifest says"):
        for _ in it:
            pass


def test_an_object_that_vanishes_mid_epoch_is_an_error_naming_it(s3, wide, tmp_path):
    bucket, url = wide
    ds = stoker.open(url, cache_dir=tmp_path / "c")
    key = f"st/{ds.manifest.shards[-1].file}"
    it = iter(stoker.Loader(ds, batch_size=1000, num_workers=0))
    next(it)
    s3.client().delete_object(Bucket=bucket, Key=key)
    with pytest.raises(ShardError, match=f"s3://{bucket}/{key}.*missing from the object store"):
        for _ in it:
            pass


def test_the_server_going_away_and_coming_back_is_retried_and_counted(s3, stored, tmp_path):
    _, url = stored
    ds = stoker.open(url, cache_dir=tmp_path / "c")
    s3.stop()

    def back_after_the_first_retry() -> None:
        for _ in range(3000):
            if ds.remote_stats()["retries"] >= 1:
                break
            threading.Event().wait(0.01)
        s3.start()  # back within the retries' backoff (0.25 + 0.5 + 1 s)

    back = threading.Thread(target=back_after_the_first_retry)
    back.start()
    try:
        got = ds[:]["x"]
    finally:
        back.join()
    assert got.tolist() == list(range(N))  # the whole epoch, not a short one
    assert ds.remote_stats()["retries"] >= 1


def test_a_server_that_stays_away_is_an_error_after_bounded_retries(s3, stored, tmp_path):
    _, url = stored
    ds = stoker.open(url, cache_dir=tmp_path / "c")
    s3.stop()
    with pytest.raises(StoreError, match=f"failed 4 times.*{url}.*reachable"):
        ds[:]
    assert ds.remote_stats()["retries"] == 3
    with pytest.raises(StoreError, match="reachable"):
        stoker.open(url, cache_dir=tmp_path / "d")


def test_a_secret_key_never_appears_in_an_error_the_stats_or_the_log(s3, stored, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the clients' own included
    _, url = stored
    secret = "SECRETabcdefSECRET0123456789"
    options = s3.options(secret=secret)
    ds = stoker.open(url, cache_dir=tmp_path / "c", storage_options=options)
    s3.stop()
    with pytest.raises(StokerError) as info:
        ds[:]
    text = f"{info.value!s} {info.value!r} {info.value.__cause__!r} {info.value.__context__!r}"
    assert "reachable" in text and secret not in text
    assert secret not in repr(ds.remote_stats()) and secret not in repr(ds)
    assert caplog.records and secret not in caplog.text


@pytest.fixture
def strict_server():
    """A moto_server process that checks credentials (INITIAL_NO_AUTH_ACTION_COUNT=0): every key here is wrong."""
    pytest.importorskip("moto.server", reason="the remote-store tests need moto[server] (dev extra)")
    pytest.importorskip("s3fs", reason="the remote-store tests need s3fs: pip install 'stoker[remote]'")
    import os
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0")
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=30)


def test_wrong_credentials_are_named_without_the_secret(strict_server, tmp_path, monkeypatch):
    secret = "TOPSECRET-wrong-0123456789"
    options = {"key": "AKIAWRONGKEY000", "secret": secret, "endpoint_url": strict_server}
    with pytest.raises(StoreError, match="access was refused.*credentials") as info:
        stoker.open("s3://bucket/st", cache_dir=tmp_path, storage_options=options)
    assert "s3://bucket/st" in str(info.value) and secret not in f"{info.value!s}{info.value!r}"
    assert info.value.__cause__ is None and info.value.__suppress_context__
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGKEY000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ENDPOINT_URL", strict_server)
    with pytest.raises(StoreError, match="access was refused") as info:
        stoker.write("s3://bucket/new", {"x": np.arange(10)})
    assert secret not in str(info.value)
    assert not (tmp_path / "s3:").exists()


def test_a_server_that_accepts_but_never_answers_times_out_not_hangs(tmp_path):
    import socket

    pytest.importorskip("s3fs", reason="this test needs s3fs: pip install 'stoker[remote]'")

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # connections are accepted by the kernel and never answered
    port = listener.getsockname()[1]
    options = {
        "key": "k" * 8,
        "secret": "s" * 16,
        "endpoint_url": f"http://127.0.0.1:{port}",
        "config_kwargs": {"connect_timeout": 1, "read_timeout": 1},
    }
    try:
        with pytest.raises(StoreError, match="failed 4 times.*reachable"):
            stoker.open("s3://bucket/st", cache_dir=tmp_path, storage_options=options)
    finally:
        listener.close()
