"""Stores written to a real S3-protocol server on loopback: uploads, the manifest last, overwrite, resume."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, StoreExistsError, StoreNotFoundError
from stoker.remote.upload import RemoteStoreWriter

N = 3000


def _keys(s3, bucket: str, prefix: str) -> set[str]:
    listing = s3.client().list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    return {o["Key"][len(prefix) + 1 :] for o in listing.get("Contents", [])}


def test_shards_upload_as_they_finish_and_the_manifest_comes_last(s3, tmp_path):
    bucket = s3.bucket()
    url = f"s3://{bucket}/st"
    with stoker.StoreWriter(url, shard_size="8KB") as writer:
        assert isinstance(writer, RemoteStoreWriter)
        writer.add_batch({"x": np.arange(N, dtype=np.int64)})
        uploaded = _keys(s3, bucket, "st")
        assert len(uploaded) >= 2 and "manifest.json" not in uploaded  # shards there, no store yet
        with pytest.raises(StoreNotFoundError, match=url):
            stoker.open(url, cache_dir=tmp_path / "c")  # a reader never sees a partial store
    assert "manifest.json" in _keys(s3, bucket, "st")
    assert stoker.open(url, cache_dir=tmp_path / "c")[:]["x"].tolist() == list(range(N))
    assert not any(p.name.startswith("stoker-upload-") for p in tmp_path.iterdir())


def test_overwrite_is_required_and_the_old_store_stays_readable_until_the_new_manifest(s3, tmp_path):
    bucket = s3.bucket()
    url = f"s3://{bucket}/st"
    stoker.write(url, {"x": np.arange(N)}, shard_size="8KB")
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        stoker.write(url, {"x": np.arange(10)})
    old_keys = _keys(s3, bucket, "st")
    with stoker.StoreWriter(url, shard_size="8KB", overwrite=True) as writer:
        writer.add_batch({"x": -np.arange(N // 2)})
        # mid-write the old store is whole: its manifest and every shard it names are untouched
        assert stoker.open(url, cache_dir=tmp_path / "mid")[:]["x"].tolist() == list(range(N))
    assert stoker.open(url, cache_dir=tmp_path / "new")[:]["x"].tolist() == (-np.arange(N // 2)).tolist()
    left = _keys(s3, bucket, "st")
    assert not (old_keys - {"manifest.json"}) & left  # the replaced store's shards were deleted after


def test_a_failed_write_leaves_no_store_and_no_objects(s3):
    bucket = s3.bucket()
    with pytest.raises(ValueError, match="boom"):
        with stoker.StoreWriter(f"s3://{bucket}/st", shard_size="8KB") as writer:
            writer.add_batch({"x": np.arange(N)})
            raise ValueError("boom")
    assert _keys(s3, bucket, "st") == set()


def test_a_url_staging_directory_is_refused(s3):
    with pytest.raises(ConfigError, match="staging"):
        stoker.StoreWriter(f"s3://{s3.bucket()}/st", staging=f"s3://{s3.bucket()}/staging")


def test_resume_skips_shards_already_uploaded(s3, tmp_path):
    bucket = s3.bucket()
    url = f"s3://{bucket}/st"
    staging = tmp_path / "staging"
    data = np.arange(N, dtype=np.int64)
    first = stoker.StoreWriter(url, shard_size="8KB", staging=staging)
    first.add_batch({"x": data[: N // 2]})
    done = first.rows_written - first._pending_rows  # rows in shards already committed and uploaded
    first._unlock()  # the process dies here: the kernel would drop its lock, nothing else happens
    assert done > 0
    client = s3.client()
    before = {k: client.head_object(Bucket=bucket, Key=f"st/{k}")["LastModified"] for k in _keys(s3, bucket, "st")}
    with stoker.StoreWriter(url, shard_size="8KB", staging=staging) as again:
        assert again.rows_written == done
        after = {k: client.head_object(Bucket=bucket, Key=f"st/{k}")["LastModified"] for k in before}
        assert after == before and again._uploaded == set(before)  # found there, not uploaded again
        again.add_batch({"x": data[done:]})
    assert stoker.open(url, cache_dir=tmp_path / "c")[:]["x"].tolist() == data.tolist()
    assert not staging.exists()


_KILLED = """
import sys, numpy as np, stoker
with stoker.StoreWriter(sys.argv[1], shard_size="8KB", staging=sys.argv[2]) as w:
    w.add_batch({"x": np.arange(w.rows_written, int(sys.argv[3]), dtype=np.int64)})  # a resume skips what is done
"""


def test_a_write_killed_after_a_shard_resumes_and_completes(s3, tmp_path):
    url = f"s3://{s3.bucket()}/st"
    staging = tmp_path / "staging"
    pause_at = Path(__file__).resolve().parents[1] / "pause_at.py"  # fault injection: stop after the journal entry
    proc = subprocess.Popen(
        [sys.executable, str(pause_at), "shard-committed", "-c", _KILLED, url, str(staging), str(N)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "paused: shard-committed" in line:
            break
    else:
        raise AssertionError(f"the write ended (rc {proc.wait()}) without committing a shard")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    with pytest.raises(StoreNotFoundError):
        stoker.open(url, cache_dir=tmp_path / "c0")
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, url, str(staging), str(N)], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert stoker.open(url, cache_dir=tmp_path / "c")[:]["x"].tolist() == list(range(N))


def test_convert_writes_to_a_url(s3, tmp_path):
    url = f"s3://{s3.bucket()}/arrays"
    result = stoker.convert.arrays({"a": np.arange(500, dtype=np.int32)}, url)
    ds = stoker.open(result, cache_dir=tmp_path / "c")  # the result names the URL
    assert ds[:]["a"].tolist() == list(range(500))


def test_the_cli_converts_to_a_url(s3, tmp_path):
    np.save(tmp_path / "a.npy", np.arange(300, dtype=np.int16))
    url = f"s3://{s3.bucket()}/cli"
    run = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "convert", "arrays", f"a={tmp_path / 'a.npy'}", url],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert stoker.open(url, cache_dir=tmp_path / "c").num_shards >= 1
    assert not (tmp_path / "s3:").exists()


def test_convert_dataset_to_a_url_writes_nothing_in_the_working_directory(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("fsspec", reason="this test needs fsspec: pip install 'stoker[remote]'")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    url = "memory://stoker-tests/convert-dataset"
    stoker.convert.dataset(torch.utils.data.TensorDataset(torch.arange(10)), url, workers=0, overwrite=True)
    assert stoker.open(url, cache_dir=tmp_path / "c")[:]["0"].tolist() == list(range(10))
    assert list((tmp_path / "cwd").iterdir()) == []  # staged under the cache root, never in a directory named memory:
