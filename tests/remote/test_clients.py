"""Which object client reads and writes a store (obstore or fsspec), and the options each takes, on the loopback server."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError
from stoker.remote import obstore_fetcher, registry
from stoker.remote.location import remote

pytest.importorskip("obstore", reason="these tests need obstore: pip install 'stoker[remote]'")


def _only_options(monkeypatch) -> None:
    """No AWS variables in the environment: the credentials and endpoint come from storage_options alone."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def test_s3_goes_through_obstore_with_the_s3fs_options_mapped(s3, tmp_path, monkeypatch):
    _only_options(monkeypatch)
    url = f"s3://{s3.bucket()}/st"
    options = s3.options(client_kwargs={"region_name": "us-east-1"}, config_kwargs={"read_timeout": 30})
    stoker.write(url, {"x": np.arange(500)}, shard_size="1KB", storage_options=options)
    ds = stoker.open(url, cache_dir=tmp_path, storage_options=options)
    assert ds[:]["x"].tolist() == list(range(500))
    assert ds.remote_stats()["client"] == "obstore"


def test_the_environment_s_credentials_and_endpoint_reach_obstore(s3, tmp_path):
    url = f"s3://{s3.bucket()}/st"  # the s3 fixture sets AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL (http://)
    stoker.write(url, {"x": np.arange(50)})
    ds = stoker.open(url, cache_dir=tmp_path)
    assert ds.remote_stats()["client"] == "obstore" and ds[:]["x"].tolist() == list(range(50))


def test_a_profile_keeps_fsspec_in_auto_and_is_refused_when_obstore_is_asked_for(s3, tmp_path, monkeypatch):
    url = f"s3://{s3.bucket()}/st"  # before the profile is set: the fixture's boto3 client reads no profile
    config = tmp_path / "config"
    key, secret = s3.options()["key"], s3.options()["secret"]
    config.write_text(f"[profile tests]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "tests")
    stoker.write(url, {"x": np.arange(20)})  # the key comes from the profile, read by s3fs/botocore
    ds = stoker.open(url, cache_dir=tmp_path / "c")
    assert ds.remote_stats()["client"] == "fsspec" and ds[:]["x"].tolist() == list(range(20))
    monkeypatch.setenv(registry.CLIENT_ENV, "obstore")
    with pytest.raises(ConfigError, match="profile"):
        stoker.open(url, cache_dir=tmp_path / "d")


def test_an_option_obstore_has_no_equivalent_for_keeps_fsspec(s3, tmp_path, monkeypatch):
    url = f"s3://{s3.bucket()}/st"
    stoker.write(url, {"x": np.arange(20)})
    options = s3.options(use_ssl=False)  # an s3fs keyword obstore does not take
    assert remote(url, options).fetcher.name == "fsspec"
    monkeypatch.setenv(registry.CLIENT_ENV, "obstore")
    with pytest.raises(ConfigError, match="use_ssl"):
        remote(url, options)


@pytest.mark.parametrize("value", ["boto", "s3fs "])
def test_an_unknown_client_name_is_refused(value, monkeypatch):
    monkeypatch.setenv(registry.CLIENT_ENV, value)
    with pytest.raises(ConfigError, match=registry.CLIENT_ENV):
        remote("s3://bucket/st")


def test_fsspec_serves_what_obstore_does_not(tmp_path):
    assert remote("memory://stoker-tests/clients").fetcher.name == "fsspec"


def test_shards_download_as_ranged_gets_and_arrive_whole(s3, tmp_path, monkeypatch):
    url = f"s3://{s3.bucket()}/st"
    v = np.random.default_rng(0).random((4000, 8))
    stoker.write(url, {"v": v}, shard_size="64KB")
    monkeypatch.setattr(obstore_fetcher, "RANGE_BYTES", 5000)  # each shard cut in ranges of 5000 bytes
    ds = stoker.open(url, cache_dir=tmp_path, verify=True)
    assert ds.remote_stats()["client"] == "obstore"
    np.testing.assert_array_equal(ds[:]["v"], v)
