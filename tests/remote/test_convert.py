"""Conversions written to a URL on the loopback S3 server: storage_options reach the writer, the dataset converter
stages locally, uploads shard by shard, puts the manifest last and resumes after a failure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stoker
import stoker.convert
from stoker.cli.main import main
from stoker.convert.from_dataset import ResumeWarning, staging_dir
from stoker.errors import ConfigError, SampleError, StoreNotFoundError

N = 600


class Squares:
    """A map-style dataset whose index ``bad`` raises while the file ``broken`` exists."""

    def __init__(self, broken: Path, bad: int) -> None:
        self.broken, self.bad = broken, bad

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if i == self.bad and self.broken.exists():
            raise RuntimeError(f"sample {i} is broken")
        return {"x": np.int64(i), "sq": np.full(4, i * i, dtype=np.int64)}


def _only_options(monkeypatch) -> None:
    """No AWS variables: whatever reaches the server came through storage_options."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def _keys(s3, bucket: str, prefix: str) -> set[str]:
    listing = s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    return {o["Key"][len(prefix) + 1 :] for o in listing.get("Contents", [])}


def test_convert_arrays_to_a_url_takes_storage_options(s3, tmp_path, monkeypatch):
    _only_options(monkeypatch)
    url = f"s3://{s3.bucket()}/arr"
    result = stoker.convert.arrays(
        {"x": np.arange(N)}, url, shard_size="1KB", storage_options=s3.options(), progress=False
    )
    assert result.rows == N
    ds = stoker.open(url, cache_dir=tmp_path, storage_options=s3.options())
    assert ds[:]["x"].tolist() == list(range(N)) and ds.num_shards > 1


def test_storage_options_for_a_local_store_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="local path"):
        stoker.convert.arrays({"x": np.arange(5)}, tmp_path / "st", storage_options={"anon": True})
    with pytest.raises(ConfigError, match="local path"):
        stoker.write(tmp_path / "st2", {"x": np.arange(5)}, storage_options={"anon": True})
    assert not (tmp_path / "st").exists() and not (tmp_path / "st2").exists()


def test_convert_dataset_to_a_url_uploads_and_resumes_after_a_failure(s3, tmp_path, monkeypatch):
    _only_options(monkeypatch)
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    bucket = s3.bucket()
    url = f"s3://{bucket}/ds"
    broken = tmp_path / "broken"
    broken.touch()
    data = Squares(broken, bad=N - 50)
    kw = {"shard_size": "2KB", "workers": 0, "chunk_size": 32, "progress": False, "storage_options": s3.options()}
    with pytest.raises(SampleError, match=f"dataset\\[{N - 50}\\]"):
        stoker.convert.dataset(data, url, **kw)
    staged = staging_dir(url)
    assert staged.is_dir() and staged.is_relative_to(tmp_path / "cache")
    uploaded = _keys(s3, bucket, "ds")
    assert len(uploaded) >= 2 and "manifest.json" not in uploaded  # finished shards are up, the store is not
    with pytest.raises(StoreNotFoundError):
        stoker.open(url, cache_dir=tmp_path / "c0", storage_options=s3.options())
    broken.unlink()
    with pytest.warns(ResumeWarning, match="resuming at row"):
        result = stoker.convert.dataset(data, url, **kw)
    assert result.report["resumed_at"] > 0 and result.rows == N
    ds = stoker.open(url, cache_dir=tmp_path / "c1", storage_options=s3.options())
    got = ds[:]
    assert got["x"].tolist() == list(range(N)) and got["sq"][:, 0].tolist() == [i * i for i in range(N)]
    assert not staged.exists()  # the staging directory goes once the manifest is up
    assert {info.file for info in ds.manifest.shards} | {"manifest.json"} == _keys(s3, bucket, "ds")


def test_cli_convert_takes_storage_options(s3, tmp_path, monkeypatch, capsys):
    _only_options(monkeypatch)
    np.savez(tmp_path / "a.npz", x=np.arange(N))
    url = f"s3://{s3.bucket()}/cli"
    opts = s3.options()
    argv = ["convert", "arrays", str(tmp_path / "a.npz"), url, "--shard-size", "1KB", "--no-progress"]
    argv += ["--storage-option", f"endpoint_url={opts['endpoint_url']}", "--storage-option", f"key={opts['key']}"]
    argv += ["--storage-option", f'{{"secret": "{opts["secret"]}", "client_kwargs": {{"region_name": "us-east-1"}}}}']
    assert main(argv) == 0
    assert f"wrote {url}:" in capsys.readouterr().out
    assert stoker.open(url, cache_dir=tmp_path / "c", storage_options=opts)[:]["x"].tolist() == list(range(N))


def test_cli_refuses_a_storage_option_that_is_not_key_value(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["convert", "arrays", "a.npz", "s3://b/x", "--storage-option", "novalue"])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_storage_options_on_the_command_line_nest_parse_json_and_merge():
    import argparse

    from stoker.cli.convert_common import shared, shared_options

    parser = argparse.ArgumentParser()
    shared_options(parser, workers=None)
    args = parser.parse_args(
        [
            "--storage-option",
            "client_kwargs.region_name=eu-west-1",
            "--storage-option",
            "anon=true",
            "--storage-option",
            '{"client_kwargs": {"endpoint_url": "http://h:9000"}, "config_kwargs": {"read_timeout": 5}}',
            "--storage-option",
            "key=AKIA=with=equals",
        ]
    )
    assert shared(args)["storage_options"] == {
        "client_kwargs": {"region_name": "eu-west-1", "endpoint_url": "http://h:9000"},
        "anon": True,
        "config_kwargs": {"read_timeout": 5},
        "key": "AKIA=with=equals",
    }
    assert "storage_options" not in shared(parser.parse_args([]))
