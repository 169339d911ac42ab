"""stoker.store.shardfile: shard files written with their checksum (xxh3_128, or sha256 of format 1) computed on the way."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import xxhash

import stoker
from stoker.store.shardfile import HashingFile, file_checksum, slices, write_batch_file


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


def test_slices_end_at_multiples_of_the_slice_in_the_file():
    # each aligned slice of the file is written by one write() call (large page-cache folios)
    assert slices(4, 2996, 1000) == [(0, 996), (996, 1996), (1996, 2996)]
    assert slices(0, 2500, 1000) == [(0, 1000), (1000, 2000), (2000, 2500)]
    assert slices(7, 0, 1000) == []
    for pos, n in ((0, 10), (999, 5002), (1500, 1), (123_456, 98_765)):
        pieces = slices(pos, n, 1000)
        assert pieces[0][0] == 0 and pieces[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
        assert all(0 < stop - start <= 1000 for start, stop in pieces)
        assert all((pos + stop) % 1000 == 0 for _, stop in pieces[:-1])


def test_write_batch_file_is_a_plain_arrow_stream(tmp_path):
    batch = pa.RecordBatch.from_arrays([pa.array(np.arange(1000)), pa.array([str(i) for i in range(1000)])], ["a", "b"])
    size, digest = write_batch_file(tmp_path / "b.arrow", batch, "sha256")
    raw = (tmp_path / "b.arrow").read_bytes()
    assert size == len(raw) and digest == hashlib.sha256(raw).hexdigest()
    assert pa.ipc.open_stream(str(tmp_path / "b.arrow")).read_all().to_batches()[0].equals(batch)
