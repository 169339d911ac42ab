"""Every remote failure is a short StokerError, with the client's own error behind ``__cause__``
(remote/location.py: ``Remote.call``), for both clients, on the loopback S3 server."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, StoreError, StoreNotFoundError

CLIENTS = ["obstore", "fsspec"]
DATA = {"x": np.arange(10, dtype=np.int64)}


@pytest.fixture(params=CLIENTS)
def client(request, s3, monkeypatch):
    if request.param == "obstore":
        pytest.importorskip("obstore", reason="these runs need obstore: pip install 'stoker[remote]'")
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", request.param)
    return request.param


def short_with_cause(exc: BaseException) -> str:
    text = str(exc)
    assert len(text) < 300 and "\n" not in text and "<?xml" not in text, text
    assert exc.__cause__ is not None  # the client's dump, for a traceback
    return text


def test_a_write_to_a_missing_bucket_is_a_short_store_not_found_error(client, tmp_path):
    # was: a builtin FileNotFoundError with a 1,451-character client dump (obstore)
    with pytest.raises(StoreNotFoundError) as info:
        stoker.write("s3://missing-bucket/x", DATA)
    text = short_with_cause(info.value)
    assert isinstance(info.value, FileNotFoundError)  # `except FileNotFoundError` still catches it
    assert "s3://missing-bucket/x/" in text and "the bucket missing-bucket does not exist" in text
    assert not any(p.name.startswith("stoker-upload-") for p in tmp_path.iterdir())


def test_a_writer_to_a_missing_bucket_fails_when_created_before_reading_a_row(client, tmp_path, monkeypatch):
    # was: the writer was made, read and wrote every row, and failed at its first upload
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a writer's local work would go
    with pytest.raises(StoreNotFoundError) as info:
        stoker.StoreWriter("s3://missing-bucket/x")
    assert "the bucket missing-bucket does not exist" in short_with_cause(info.value)
    read: list[int] = []

    def rows():
        for i in range(100):
            read.append(i)
            yield {"x": np.full(4, i)}

    with pytest.raises(StoreNotFoundError, match="missing-bucket does not exist"):
        stoker.write("s3://missing-bucket/x", rows(), shard_size=64)
    assert read == [] and not list(tmp_path.iterdir())  # no row read, no local work left


def test_a_merge_and_a_conversion_to_a_missing_bucket_say_so_too(client, tmp_path):
    part = stoker.write(tmp_path / "part", DATA)
    with pytest.raises(StoreNotFoundError) as info:
        stoker.merge([part], "s3://missing-bucket/m")
    assert "missing-bucket does not exist" in short_with_cause(info.value)
    with pytest.raises(StoreNotFoundError) as info:
        stoker.convert.arrays(DATA, "s3://missing-bucket/c")
    assert "missing-bucket does not exist" in short_with_cause(info.value)


def test_an_unreachable_endpoint_keeps_the_client_error_as_cause(client, s3, monkeypatch):
    monkeypatch.setattr("stoker.remote.location.BACKOFF_S", 0.0)
    with pytest.raises(StoreError, match="failed 4 times.*reachable") as info:
        stoker.write(f"s3://{s3.bucket()}/y", DATA, storage_options=s3.options(endpoint_url="http://127.0.0.1:9"))
    short_with_cause(info.value)


def test_an_option_fsspec_does_not_take_is_a_config_error_at_once(s3, monkeypatch):
    # was: a TypeError retried 4 times, then "check that the object store is reachable"
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", "fsspec")
    with pytest.raises(ConfigError, match="bogus_option.*storage_options") as info:
        stoker.write(f"s3://{s3.bucket()}/y", DATA, storage_options=s3.options(bogus_option=3))
    assert info.value.option == "storage_options" and "failed" not in short_with_cause(info.value)
