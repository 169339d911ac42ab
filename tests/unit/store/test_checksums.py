"""Shard checksums: xxh3_128 computed while writing (format 2); sha256 stores (format 1) still read."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pytest
import xxhash

import stoker
from stoker.errors import ConfigError, ManifestError, ShardError
from stoker.store.format import ShardInfo
from stoker.store.shardfile import HashingFile, file_checksum, write_batch_file
from stoker.store.writer import JOURNAL_NAME, StoreWriter


def _as_format_1(store):
    """Rewrite a store's manifest the way stoker wrote format 1: version 1, a sha256 per shard."""
    path = store / "manifest.json"
    m = json.loads(path.read_text())
    m["version"] = 1
    for s in m["shards"]:
        del s["xxh3_128"]
        s["sha256"] = hashlib.sha256((store / s["file"]).read_bytes()).hexdigest()
    path.write_text(json.dumps(m))


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_written_checksum_is_the_files_xxh3(mixed_store):
    m = json.loads((mixed_store / "manifest.json").read_text())
    for s in m["shards"]:
        assert s["xxh3_128"] == xxhash.xxh3_128((mixed_store / s["file"]).read_bytes()).hexdigest()
    stoker.open(mixed_store, verify=True)


def test_hashing_file_slices_large_writes(tmp_path, monkeypatch):
    import stoker.store.shardfile as shardfile

    monkeypatch.setattr(shardfile, "_SLICE", 1000)  # many slices per buffer, one byte short of a multiple
    data = np.random.default_rng(0).integers(0, 255, 10_999, dtype=np.uint8)
    f = HashingFile(tmp_path / "f")
    assert f.write(b"head") == 4 and f.write(pa.py_buffer(data)) == 10_999 and f.tell() == 11_003
    f.close()
    raw = (tmp_path / "f").read_bytes()
    assert raw == b"head" + data.tobytes()
    assert f.hexdigest() == xxhash.xxh3_128(raw).hexdigest() == file_checksum(tmp_path / "f", "xxh3_128", block=777)


def test_write_batch_file_is_a_plain_arrow_file(tmp_path):
    batch = pa.RecordBatch.from_arrays([pa.array(np.arange(1000)), pa.array([str(i) for i in range(1000)])], ["a", "b"])
    size, digest = write_batch_file(tmp_path / "b.arrow", batch, "sha256")
    raw = (tmp_path / "b.arrow").read_bytes()
    assert size == len(raw) and digest == hashlib.sha256(raw).hexdigest()
    assert pa.ipc.open_file(str(tmp_path / "b.arrow")).read_all().to_batches()[0].equals(batch)


def test_format_1_store_opens_and_verifies(mixed_store, mixed_columns):
    _as_format_1(mixed_store)
    ds = stoker.open(mixed_store, verify=True)
    assert ds.manifest.version == 1 and {s.algorithm for s in ds.manifest.shards} == {"sha256"}
    np.testing.assert_array_equal(ds[:]["label"], mixed_columns["label"])


def test_format_1_altered_shard_fails_sha256(mixed_store):
    _as_format_1(mixed_store)
    _flip_a_byte(mixed_store / "shard-00001.arrow")
    stoker.open(mixed_store)
    with pytest.raises(ShardError, match="shard-00001.arrow has sha256.*altered"):
        stoker.open(mixed_store, verify=True)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda m, s: s.pop("xxh3_128"), "no checksum"),  # format 2 without a checksum
        (lambda m, s: m.update(version=1), "no checksum"),  # format 1 knows only sha256
    ],
)
def test_shard_without_a_known_checksum_is_refused(mixed_store, mutate, match):
    path = mixed_store / "manifest.json"
    m = json.loads(path.read_text())
    mutate(m, m["shards"][0])
    path.write_text(json.dumps(m))
    with pytest.raises(ManifestError, match=match):
        stoker.open(mixed_store)


def test_unknown_algorithm_is_refused():
    with pytest.raises(ValueError, match="unknown checksum 'md5'"):
        ShardInfo("shard-00000.arrow", 1, 10, "00", "md5")


def test_cli_verify_catches_an_altered_shard(mixed_store, capsys):
    from stoker.cli.main import main

    assert main(["inspect", str(mixed_store), "--verify", "--shards"]) == 0
    assert "xxh3_128:" in capsys.readouterr().out
    _flip_a_byte(mixed_store / "shard-00000.arrow")
    assert main(["inspect", str(mixed_store), "--verify"]) == 1
    assert "xxh3_128" in capsys.readouterr().err


def _interrupted_write(tmp_path):
    """A staging write of 250 rows stopped after its finished shards; returns (staging, journal)."""
    staging = tmp_path / ".s.partial"
    with pytest.raises(KeyboardInterrupt), StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata={"k": 1}) as w:
        w.add_batch({"x": np.arange(250)})
        raise KeyboardInterrupt
    return staging, json.loads((staging / JOURNAL_NAME).read_text())


def test_resume_keeps_sha256_shards_of_an_older_journal(tmp_path):
    staging, journal = _interrupted_write(tmp_path)
    for s in journal["shards"]:  # as an older stoker wrote them
        del s["xxh3_128"]
        s["sha256"] = hashlib.sha256((staging / s["file"]).read_bytes()).hexdigest()
    (staging / JOURNAL_NAME).write_text(json.dumps(journal))
    with StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata={"k": 1}) as w:
        assert w.rows_written == 200
        w.add_batch({"x": np.arange(200, 300)})
    ds = stoker.open(tmp_path / "s", verify=True)
    assert [s.algorithm for s in ds.manifest.shards] == ["sha256", "sha256", "xxh3_128"]
    assert ds[:]["x"].tolist() == list(range(300))


def test_journal_without_checksums_is_refused(tmp_path):
    staging, journal = _interrupted_write(tmp_path)
    del journal["shards"][0]["xxh3_128"]
    (staging / JOURNAL_NAME).write_text(json.dumps(journal))
    with pytest.raises(ConfigError, match="unreadable"):
        StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata={"k": 1})
