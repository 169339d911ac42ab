"""Spliced shard downloads (``store/spliced.py``): the kernel moves a GET's body into the cache file.

On the real loopback S3 server of conftest.py (moto, an http:// endpoint), through obstore; the
faults a server can send mid-body are played by a few lines of socket server on loopback.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, ShardError, StoreError
from stoker.store import spliced

pytestmark = pytest.mark.usefixtures("obstore_client")


@pytest.fixture
def stored(s3):
    """(bucket, url, values) of a store of several shards of about 64 KB."""
    bucket = s3.bucket()
    url = f"s3://{bucket}/st"
    v = np.random.default_rng(3).random((4000, 16))
    stoker.write(url, {"v": v}, shard_size="64KB")
    return bucket, url, v


def test_spliced_shards_hold_the_objects_bytes(s3, stored, tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_REMOTE_SPLICE", "1")
    bucket, url, v = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    np.testing.assert_array_equal(ds[:]["v"], v)
    stats = ds.remote_stats()
    assert stats["splice"] == "on"
    assert stats["fetched_by"] == {"spliced": ds.num_shards} and ds.num_shards > 1
    assert stats["splice_declined"] == 0
    for info in ds.manifest.shards:  # the cached files are the objects, byte for byte
        body = s3.client().get_object(Bucket=bucket, Key=f"st/{info.file}")["Body"].read()
        assert (ds.remote.directory / info.file).read_bytes() == body


def test_switched_off_obstore_fetches_every_shard(stored, tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_REMOTE_SPLICE", "0")
    _, url, v = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    np.testing.assert_array_equal(ds[:]["v"], v)
    stats = ds.remote_stats()
    assert stats["fetched_by"] == {"obstore": ds.num_shards}
    assert stats["splice"] == "off: STOKER_REMOTE_SPLICE=0"


def test_auto_leaves_a_store_over_its_size_to_obstore_and_1_splices_it(stored, tmp_path, monkeypatch):
    _, url, v = stored
    monkeypatch.setattr(spliced, "AUTO_MAX_STORE", 100_000)  # the store is ~512 KB
    monkeypatch.delenv("STOKER_REMOTE_SPLICE", raising=False)
    ds = stoker.open(url, cache_dir=tmp_path / "auto")
    np.testing.assert_array_equal(ds[:]["v"], v)
    assert ds.remote_stats()["fetched_by"] == {"obstore": ds.num_shards}
    pattern = r"off: a store of \d MiB, over the 0 MiB that STOKER_REMOTE_SPLICE=auto splices .*"
    assert re.fullmatch(pattern, ds.remote_stats()["splice"])
    monkeypatch.setenv("STOKER_REMOTE_SPLICE", "1")
    forced = stoker.open(url, cache_dir=tmp_path / "forced")
    np.testing.assert_array_equal(forced[:]["v"], v)
    assert forced.remote_stats()["fetched_by"] == {"spliced": forced.num_shards}
    monkeypatch.setattr(spliced, "AUTO_MAX_STORE", 2**30)
    monkeypatch.setenv("STOKER_REMOTE_SPLICE", "auto")
    small = stoker.open(url, cache_dir=tmp_path / "small")
    np.testing.assert_array_equal(small[:]["v"], v)
    assert small.remote_stats()["fetched_by"] == {"spliced": small.num_shards}


def test_a_switch_value_that_is_not_0_or_1_is_a_config_error(stored, tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_REMOTE_SPLICE", "sometimes")
    with pytest.raises(ConfigError, match="STOKER_REMOTE_SPLICE='sometimes'"):
        stoker.open(stored[1], cache_dir=tmp_path)


def test_fsspec_never_splices(stored, tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", "fsspec")
    ds = stoker.open(stored[1], cache_dir=tmp_path)
    np.testing.assert_array_equal(ds[:]["v"], stored[2])
    assert ds.remote_stats()["fetched_by"] == {"fsspec": ds.num_shards}
    assert ds.remote_stats()["splice"].startswith("off")


def test_a_truncated_object_is_declined_then_refused_as_obstore_refuses_it(s3, stored, tmp_path):
    bucket, url, _ = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    info = ds.manifest.shards[1]
    key = f"st/{info.file}"
    body = s3.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.client().put_object(Bucket=bucket, Key=key, Body=body[: len(body) // 2])
    with pytest.raises(ShardError, match=f"s3://{bucket}/{key}.*bytes where the manifest says"):
        ds[:]
    stats = ds.remote_stats()
    assert stats["splice_declined"] == 2  # both tries handed to obstore, which fetched the short object
    assert stats["splice_last_declined"] == f"Content-Length {len(body) // 2} where the manifest says {info.bytes}"
    assert not (ds.remote.directory / info.file).exists()


def test_an_altered_object_of_the_right_size_is_spliced_then_refused_by_its_checksum(s3, stored, tmp_path):
    bucket, url, _ = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    key = f"st/{ds.manifest.shards[2].file}"
    body = bytearray(s3.client().get_object(Bucket=bucket, Key=key)["Body"].read())
    body[-20] ^= 0xFF
    s3.client().put_object(Bucket=bucket, Key=key, Body=bytes(body))
    with pytest.raises(ShardError, match=f"s3://{bucket}/{key} arrived twice with xxh3_128"):
        ds[:]
    assert ds.remote_stats()["checksum_retries"] == 1 and ds.remote_stats()["splice_declined"] == 0


def test_a_missing_object_is_declined_and_named_as_missing(s3, stored, tmp_path):
    bucket, url, _ = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    key = f"st/{ds.manifest.shards[0].file}"
    s3.client().delete_object(Bucket=bucket, Key=key)
    with pytest.raises(ShardError, match=f"s3://{bucket}/{key}.*missing from the object store"):
        ds[:]
    assert ds.remote_stats()["splice_last_declined"] == "status 404"


def test_splicing_needs_a_plain_http_endpoint(monkeypatch):
    monkeypatch.delenv("STOKER_REMOTE_SPLICE", raising=False)
    assert spliced.splice_reason("http://127.0.0.1:9000") == ""
    assert spliced.splice_reason("https://s3.amazonaws.com") == "the endpoint is not plain http://"
    assert spliced.splice_reason("") == "the endpoint is not plain http://"


# -- faults the object store cannot be made to send: a few lines of server on loopback ---------------------------
SIGNATURE = "X-Amz-Signature=f00dfeedcafe0123456789"


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket], None]], str]]:
    """``serve(handler)``: the http:// URL of a loopback server calling ``handler`` on each connection."""
    listeners: list[socket.socket] = []

    def serve(handler: Callable[[socket.socket], None]) -> str:
        lst = socket.create_server(("127.0.0.1", 0))
        listeners.append(lst)

        def run() -> None:
            while True:
                try:
                    conn, _ = lst.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(65536)  # the request
                    handler(conn)

        threading.Thread(target=run, daemon=True).start()
        return f"http://127.0.0.1:{lst.getsockname()[1]}/b/st/shard.arrow?{SIGNATURE}"

    yield serve
    for lst in listeners:
        lst.close()


def _splicer(monkeypatch, signed: str, read_s: float = 5.0) -> spliced.Splicer:
    splicer = spliced.Splicer(store=None, timeouts=(2.0, read_s))
    monkeypatch.setattr(splicer, "_sign", lambda name: signed)
    return splicer


def _get(splicer: spliced.Splicer, tmp_path, size: int) -> bytes:
    fd = os.open(tmp_path / "part", os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        splicer.download("shard.arrow", "s3://b/st/shard.arrow", fd, size)
    finally:
        os.close(fd)
    return (tmp_path / "part").read_bytes()


def test_a_body_in_many_small_pieces_arrives_whole(raw_server, tmp_path, monkeypatch):
    body = np.random.default_rng(0).integers(0, 256, 3 * 2**20 + 123, dtype=np.uint8).tobytes()

    def trickle(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        for i in range(0, len(body), 700_001):
            conn.sendall(body[i : i + 700_001])

    splicer = _splicer(monkeypatch, raw_server(trickle))
    assert _get(splicer, tmp_path, len(body)) == body
    assert splicer.report()["spliced"] == 1


def test_chunked_encoding_is_declined(raw_server, tmp_path, monkeypatch):
    def chunked(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")

    splicer = _splicer(monkeypatch, raw_server(chunked))
    with pytest.raises(spliced.Declined, match="chunked"):
        _get(splicer, tmp_path, 5)
    assert splicer.report() == {"spliced": 0, "declined": 1, "last_declined": "chunked transfer encoding"}


def test_https_and_unsigned_urls_are_declined(tmp_path, monkeypatch):
    with pytest.raises(spliced.Declined, match="https://"):
        _get(_splicer(monkeypatch, f"https://127.0.0.1:1/b/x?{SIGNATURE}"), tmp_path, 5)
    unsigned = spliced.Splicer(store=None, timeouts=(2.0, 5.0))  # obstore cannot sign for no store
    with pytest.raises(spliced.Declined, match="presigned"):
        _get(unsigned, tmp_path, 5)


def test_a_connection_cut_mid_body_is_a_connection_error_naming_the_s3_url_not_the_signed_one(
    raw_server, tmp_path, monkeypatch
):
    def cut(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 40_000)

    with pytest.raises(ConnectionError, match=r"after 40000 of 100000 bytes of s3://b/st/shard.arrow") as info:
        _get(_splicer(monkeypatch, raw_server(cut)), tmp_path, 100_000)
    assert "Signature" not in str(info.value) and "f00dfeed" not in repr(info.value)


def test_a_stalled_body_times_out(raw_server, tmp_path, monkeypatch):
    done = threading.Event()

    def stall(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 10)
        done.wait(10)

    try:
        with pytest.raises(TimeoutError, match="no data for 0.3 s from the server after 10 of 100000 bytes"):
            _get(_splicer(monkeypatch, raw_server(stall), read_s=0.3), tmp_path, 100_000)
    finally:
        done.set()


def test_a_refused_connection_is_declined_so_obstore_reports_it(tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    splicer = _splicer(monkeypatch, f"http://127.0.0.1:{port}/b/x?{SIGNATURE}")
    with pytest.raises(spliced.Declined, match="ConnectionRefusedError connecting for s3://b/st/shard.arrow"):
        _get(splicer, tmp_path, 5)


def test_the_server_going_away_mid_read_ends_in_a_store_error_without_the_signature(s3, stored, tmp_path):
    _, url, _ = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    s3.stop()
    with pytest.raises(StoreError, match=f"failed 4 times.*{url}") as info:
        ds[:]
    assert "Signature" not in f"{info.value!s} {info.value!r}"
    assert ds.remote_stats()["splice_declined"] >= 4  # every try declined (refused); obstore's errors reported


def test_a_cache_file_system_that_refuses_splice_hands_every_shard_to_obstore(stored, tmp_path, monkeypatch):
    """A file system may refuse splice into its files (EINVAL): that was an OSError out of the read."""
    monkeypatch.setenv("STOKER_REMOTE_SPLICE", "1")
    real = os.splice
    into_files = []

    def splice(src, dst, count, *args, **kwargs):
        if stat.S_ISREG(os.fstat(dst).st_mode):
            into_files.append(dst)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(src, dst, count, *args, **kwargs)

    monkeypatch.setattr(spliced.os, "splice", splice)
    _, url, v = stored
    ds = stoker.open(url, cache_dir=tmp_path)
    np.testing.assert_array_equal(ds[:]["v"], v)
    stats = ds.remote_stats()
    assert stats["fetched_by"] == {"obstore": ds.num_shards}
    assert stats["splice_declined"] == ds.num_shards and "refuses splice (EINVAL)" in stats["splice_last_declined"]
    assert len(into_files) == 1  # tried once, then every later shard went to obstore at once
