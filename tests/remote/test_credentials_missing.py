"""Credentials that are absent or name a profile that does not exist: refused access at once, with where to give them.

The server is moto's on loopback; the AWS environment is cleared so that neither client finds a key (obstore then
asks the instance-metadata endpoint, fsspec's botocore raises NoCredentialsError or ProfileNotFound).
"""

from __future__ import annotations

import pytest

import stoker
from stoker.errors import StoreError
from stoker.remote.location import remote

from .conftest import SECRET

CLIENTS = ["obstore", "fsspec"]


@pytest.fixture
def no_credentials(s3, monkeypatch, tmp_path):
    """The moto server with no AWS key anywhere: not in the environment, no credential or config file."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    return s3


def _check(message: str, url: str) -> None:
    assert url in message
    assert "no usable credentials" in message
    assert "AWS_ACCESS_KEY_ID" in message and "AWS_PROFILE" in message and "storage_options" in message
    assert "reachable" not in message and "times" not in message  # not taken for a network fault, not retried


@pytest.mark.parametrize("client", CLIENTS)
def test_open_without_credentials_is_refused_access_naming_where_they_come_from(no_credentials, monkeypatch, client):
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", client)
    url = f"s3://{no_credentials.bucket()}/store"
    with pytest.raises(StoreError) as info:
        stoker.open(url)
    _check(str(info.value), url)


@pytest.mark.parametrize("client", CLIENTS)
def test_missing_credentials_are_not_retried(no_credentials, monkeypatch, client):
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", client)
    url = f"s3://{no_credentials.bucket()}/store"
    r = remote(url)
    with pytest.raises(StoreError):
        r.call("reading manifest.json", lambda: r.fetcher.read("manifest.json"))
    assert r.retries == 0


def test_a_profile_that_does_not_exist_is_a_store_error(no_credentials, monkeypatch):
    url = f"s3://{no_credentials.bucket()}/store"
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")  # obstore reads no profiles: fsspec takes the store
    with pytest.raises(StoreError) as info:
        stoker.open(url)
    _check(str(info.value), url)
    assert "no-such-profile" in str(info.value)


def test_the_secret_given_is_never_in_the_message(no_credentials, monkeypatch):
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", "fsspec")
    url = f"s3://{no_credentials.bucket()}/store"
    with pytest.raises(StoreError) as info:  # a secret with no key: botocore's PartialCredentialsError
        stoker.open(url, storage_options={"secret": SECRET, "endpoint_url": no_credentials.endpoint})
    assert SECRET not in str(info.value)
    assert url in str(info.value)


def test_the_cli_says_where_credentials_come_from_in_flag_words(no_credentials, tmp_path, capsys):
    from stoker.cli.main import main

    src = tmp_path / "lines.txt"
    src.write_text("one\ntwo\n")
    url = f"s3://{no_credentials.bucket()}/store"
    assert main(["convert", "text", str(src), url]) == 1
    err = capsys.readouterr().err
    assert url in err and "no usable credentials" in err
    assert "--storage-option key=... --storage-option secret=..." in err and "--storage-option{" not in err
