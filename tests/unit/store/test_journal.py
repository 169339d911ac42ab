"""stoker.store.journal: the journal of StoreWriter(staging=...) that makes conversions resumable."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError
from stoker.store.writer import JOURNAL_NAME, StoreWriter


def _interrupted(tmp_path, rows, meta=None):
    staging = tmp_path / ".s.partial"
    with (
        pytest.raises(KeyboardInterrupt),
        StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata=meta or {"k": 1}) as w,
    ):
        w.add_batch({"x": np.arange(rows)})
        raise KeyboardInterrupt
    return staging


def test_finished_shards_survive_and_the_next_writer_continues(tmp_path):
    staging = _interrupted(tmp_path, 250)  # 100 rows per shard: 200 on disk, 50 lost in the buffer
    assert (staging / JOURNAL_NAME).is_file() and not (tmp_path / "s").exists()
    w = StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata={"k": 1})
    assert w.rows_written == 200
    w.add_batch({"x": np.arange(200, 300)})
    w.close()
    ds = stoker.open(tmp_path / "s")
    assert ds[:]["x"].tolist() == list(range(300))
    assert not staging.exists() and not (tmp_path / "s" / JOURNAL_NAME).exists()


def test_other_metadata_is_refused(tmp_path):
    staging = _interrupted(tmp_path, 250)
    with pytest.raises(ConfigError, match="partial write of other input"):
        StoreWriter(tmp_path / "s", staging=staging, metadata={"k": 2})


def test_a_half_written_shard_is_removed(tmp_path):
    staging = _interrupted(tmp_path, 250)
    (staging / "shard-00002.arrow").write_bytes(b"partial")
    w = StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata={"k": 1})
    assert not (staging / "shard-00002.arrow").exists() and w.rows_written == 200


def test_resume_keeps_sha256_shards_of_an_older_journal(tmp_path):
    staging = _interrupted(tmp_path, 250)
    journal = json.loads((staging / JOURNAL_NAME).read_text())
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
    staging = _interrupted(tmp_path, 250)
    journal = json.loads((staging / JOURNAL_NAME).read_text())
    del journal["shards"][0]["xxh3_128"]
    (staging / JOURNAL_NAME).write_text(json.dumps(journal))
    with pytest.raises(ConfigError, match="unreadable"):
        StoreWriter(tmp_path / "s", shard_size=800, staging=staging, metadata={"k": 1})
