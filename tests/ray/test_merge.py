"""stoker.merge: part-stores joined in order, schema and label codes checked, never visible half-made."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stoker

pytestmark = pytest.mark.ray


def _part(path, start, n, dtype=np.int64, **meta):
    data = {"x": np.arange(start, start + n, dtype=dtype), "v": np.full((n, 2), start, np.float32)}
    return stoker.write(path, data, shard_size=64, metadata=meta)


def test_rows_in_the_parts_order_with_shards_linked(tmp_path):
    a, b = _part(tmp_path / "a", 0, 10), _part(tmp_path / "b", 10, 7)
    out = stoker.merge([a, b], tmp_path / "m")
    store = stoker.open(out, verify=True)
    assert store.gather(np.arange(17))["x"].tolist() == list(range(17))
    first = sorted(a.glob("shard-*.arrow"))[0]
    assert os.stat(out / "shard-00000.arrow").st_ino == os.stat(first).st_ino  # a link, not a copy
    with pytest.raises(stoker.StoreExistsError):
        stoker.merge([a, b], out)
    stoker.merge([b, a], out, overwrite=True)
    assert stoker.open(out).gather(np.arange(17))["x"].tolist() == list(range(10, 17)) + list(range(10))


def test_a_part_with_another_schema_is_refused_naming_it(tmp_path):
    a, b = _part(tmp_path / "a", 0, 10), _part(tmp_path / "b", 10, 7, dtype=np.int32)
    with pytest.raises(stoker.SchemaError, match=r"part .*b: column 'x' is \(kind tensor, dtype int32") as info:
        stoker.merge([a, b], tmp_path / "m")
    assert info.value.column == "x"
    c = stoker.write(tmp_path / "c", {"x": np.arange(3)})
    with pytest.raises(stoker.SchemaError, match="column 'v' is in"):
        stoker.merge([a, c], tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_parts_coding_labels_differently_are_refused(tmp_path):
    one, two = tmp_path / "one.tsv", tmp_path / "two.tsv"
    one.write_text("label\ttext\na\tthe first line\nb\tthe second\n")
    two.write_text("label\ttext\nc\tthe third line\n")
    a = stoker.convert.text(one, tmp_path / "a", progress=False)
    b = stoker.convert.text(two, tmp_path / "b", progress=False)  # c coded 0, as a is in part a
    with pytest.raises(stoker.SchemaError, match=r"column 'labels' codes labels by the names \['c'\]") as info:
        stoker.merge([a.path, b.path], tmp_path / "m", metadata={"stoker.text": {}})
    assert info.value.column == "labels"
    names = ["a", "b", "c"]  # one map for every part: merged, the codes mean one thing
    a = stoker.convert.text(one, tmp_path / "a", progress=False, label_names=names, overwrite=True)
    b = stoker.convert.text(two, tmp_path / "b", progress=False, label_names=names, overwrite=True)
    with pytest.raises(stoker.ConfigError, match="metadata 'stoker.text.source'"):
        stoker.merge([a.path, b.path], tmp_path / "m")
    meta = {"stoker.text": {**stoker.open(a.path).manifest.metadata["stoker.text"], "source": "both"}}
    out = stoker.merge([a.path, b.path], tmp_path / "m", metadata=meta)
    assert stoker.open(out).gather(np.arange(3))["labels"].tolist() == [0, 1, 2]


def test_counters_are_summed(tmp_path):
    a = _part(tmp_path / "a", 0, 3, skipped_count=2, kind="x")
    b = _part(tmp_path / "b", 3, 3, skipped_count=5, kind="x")
    meta = stoker.open(stoker.merge([a, b], tmp_path / "m")).manifest.metadata
    assert meta == {"skipped_count": 7, "kind": "x"}


def test_a_damaged_part_is_refused(tmp_path):
    a, b = _part(tmp_path / "a", 0, 10), _part(tmp_path / "b", 10, 7)
    shard = sorted(b.glob("shard-*.arrow"))[-1]
    data = bytearray(shard.read_bytes())
    data[-20] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(stoker.ShardError, match="part .*b: shard shard-0000.\\.arrow has xxh3_128"):
        stoker.merge([a, b], tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m.")]  # its working directory is gone
    with pytest.raises(stoker.ManifestError, match="no manifest.json"):
        stoker.merge([a, tmp_path / "nothing"], tmp_path / "m")


def test_a_merge_killed_before_its_manifest_leaves_nothing_visible(tmp_path):
    a, b = _part(tmp_path / "a", 0, 10), _part(tmp_path / "b", 10, 7)
    script = textwrap.dedent(
        f"""
        import stoker
        stoker.merge([{str(a)!r}, {str(b)!r}], {str(tmp_path / "m")!r})
        """
    )
    pause_at = Path(__file__).resolve().parents[1] / "pause_at.py"  # fault injection: stop before the manifest
    proc = subprocess.Popen(
        [sys.executable, str(pause_at), "merge-shards-placed", "-c", script], stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "paused: merge-shards-placed" in line, line
        hidden = [p for p in tmp_path.iterdir() if p.name.startswith(".m.tmp-")]
        assert len(hidden) == 1 and len(list(hidden[0].glob("shard-*.arrow"))) > 1  # shards in place, unseen
    finally:
        proc.kill()
        proc.wait(60)
    assert not (tmp_path / "m").exists()
    out = stoker.merge([a, b], tmp_path / "m")  # the parts are whole; the dead merge's directory is swept
    assert len(stoker.open(out, verify=True)) == 17
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m.tmp-")]


def test_merged_into_an_object_store_url(s3, tmp_path):
    a, b = _part(tmp_path / "a", 0, 10), _part(tmp_path / "b", 10, 7)
    url, opts = f"s3://{s3.bucket()}/merged", s3.options()
    stoker.merge([a, b], url, storage_options=opts)
    store = stoker.open(url, storage_options=opts, cache_dir=tmp_path / "cache", verify=True)
    assert store.gather(np.arange(17))["x"].tolist() == list(range(17))
    with pytest.raises(stoker.StoreExistsError, match="holds a store"):
        stoker.merge([a, b], url, storage_options=opts)
    stoker.merge([b, a], url, storage_options=opts, overwrite=True)  # the same shard objects, listed anew
    again = stoker.open(url, storage_options=opts, cache_dir=tmp_path / "cache2")
    assert again.gather(np.arange(17))["x"].tolist() == list(range(10, 17)) + list(range(10))
