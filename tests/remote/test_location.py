"""What a store path names, the extra a URL needs, credentials kept out of messages, cache sizes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError
from stoker.remote.cache import parse_limit
from stoker.remote.location import remote
from stoker.store.urls import as_url, is_remote, local_path


@pytest.mark.parametrize(
    ("path", "url"),
    [
        ("s3://b/x", "s3://b/x"),
        (Path("s3://b/x"), "s3://b/x"),  # pathlib folds // into /
        ("gs://b/p/q", "gs://b/p/q"),
        ("memory://b", "memory://b"),
        ("https://host/data/store", "https://host/data/store"),
    ],
)
def test_urls_are_remote(path, url):
    assert is_remote(path) and as_url(path) == url


@pytest.mark.parametrize("path", ["data/store", "/abs/store", "C:/x", "a:b", Path("stores/x"), "file:///tmp/x"])
def test_local_paths_are_not(path):
    assert not is_remote(path)


def test_file_urls_are_local_paths():
    assert local_path("file:///tmp/x") == Path("/tmp/x") == local_path(Path("file:///tmp/x"))


def test_without_fsspec_a_url_says_which_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec raises ImportError
    monkeypatch.setitem(sys.modules, "obstore.store", None)  # and obstore too
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"pip install 'stoker\[remote\]'"):
        stoker.open("s3://bucket/store")
    with pytest.raises(ConfigError, match=r"pip install 'stoker\[remote\]'"):
        stoker.write("s3://bucket/store", {"x": np.arange(3)})
    assert list(tmp_path.iterdir()) == []


def test_a_scheme_whose_package_is_missing_names_it(monkeypatch):
    fsspec = pytest.importorskip("fsspec", reason="this test needs fsspec: pip install 'stoker[remote]'")

    def missing(protocol):
        raise ImportError("Install gcsfs to access Google Storage")

    monkeypatch.setattr(fsspec, "get_filesystem_class", missing)
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", "fsspec")  # gs:// would otherwise go through obstore
    with pytest.raises(ConfigError, match="gcsfs"):
        remote("gs://bucket/store")


def test_scrub_hides_every_credential_value():
    pytest.importorskip("fsspec", reason="this test needs fsspec: pip install 'stoker[remote]'")
    rem = remote("memory://bucket/store")
    rem.storage_options = {"key": "AKIAKEY123", "secret": "s3cr3t-value", "client_kwargs": {"token": "tok-abcdef"}}
    text = rem.scrub("failed with AKIAKEY123 / s3cr3t-value / tok-abcdef")
    assert "AKIAKEY123" not in text and "s3cr3t-value" not in text and "tok-abcdef" not in text


@pytest.mark.parametrize(("value", "size"), [(None, 50 * 2**30), ("50GB", 50 * 2**30), ("1 TiB", 2**40), (4096, 4096)])
def test_cache_limits(value, size):
    assert parse_limit(value) == size


@pytest.mark.parametrize("value", ["lots", "-1GB", 0, True])
def test_bad_cache_limits(value):
    with pytest.raises(ConfigError, match="cache_limit"):
        parse_limit(value)


def test_a_memory_store_round_trips(tmp_path):
    pytest.importorskip("fsspec", reason="this test needs fsspec: pip install 'stoker[remote]'")
    url = "memory://stoker-tests/roundtrip"
    stoker.write(url, {"x": np.arange(100)}, shard_size=256, overwrite=True)
    ds = stoker.open(url, cache_dir=tmp_path)
    assert ds[:]["x"].tolist() == list(range(100)) and ds.num_shards > 1
