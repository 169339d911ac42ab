"""Chunked HDF5 datasets read chunk by chunk from a map of the file and decoded by stoker."""

from __future__ import annotations

import concurrent.futures as cf
import os

import numpy as np
import pytest

import stoker
from stoker.sources.hdf5_chunks import DecodedChunks, chunk_layout

h5py = pytest.importorskip("h5py")

LAYOUTS = {
    "gzip, whole rows": dict(chunks=(16, 3, 4), compression="gzip"),
    "gzip + shuffle, inner dims split, edge chunks": dict(chunks=(7, 2, 3), compression="gzip", shuffle=True),
    "shuffle only": dict(chunks=(10, 3, 4), shuffle=True),
    "no filter": dict(chunks=(9, 1, 4)),
    "no filter, whole rows": dict(chunks=(9, 3, 4)),
    "gzip level 9, big-endian": dict(chunks=(16, 3, 4), compression="gzip", compression_opts=9, dtype=">f8"),
}


def make(path, name="x", dtype="<i4", rows=200, written=None, **kw):
    data = (np.arange(rows * 12).reshape(rows, 3, 4) * 37 % 1001).astype(dtype)
    with h5py.File(path, "a") as f:
        ds = f.create_dataset(name, (rows, 3, 4), dtype=dtype, fillvalue=-5, **kw)
        if written is None:
            ds[:] = data
        else:
            ds[:written] = data[:written]
            data[written:] = -5
    return data


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_rows_match_h5py_for_every_layout(tmp_path, layout):
    kw = dict(LAYOUTS[layout])
    dtype = kw.pop("dtype", "<i4")
    path = tmp_path / "f.h5"
    data = make(path, dtype=dtype, **kw)
    src = stoker.sources.HDF5(path, "x")
    with h5py.File(path) as f:
        assert chunk_layout(f["x"]) is not None
    rng = np.random.default_rng(1)
    for n in (1, 5, 64, 200):
        rows = np.sort(rng.choice(200, n, replace=False))
        got = src.read_rows(rows)["x"]
        assert got.dtype == np.dtype(dtype).newbyteorder("=")
        np.testing.assert_array_equal(got, data[rows])
    assert src._chunk_reader(src.infos[0]) is not None  # noqa: SLF001 - the path under test was taken


def test_unwritten_chunks_read_as_the_fill_value(tmp_path):
    path = tmp_path / "f.h5"
    data = make(path, written=50, chunks=(16, 3, 4), compression="gzip")
    src = stoker.sources.HDF5(path, "x")
    np.testing.assert_array_equal(src.read_rows(np.arange(0, 200, 3))["x"], data[::3])


def test_unsupported_filters_go_through_h5py(tmp_path):
    path = tmp_path / "f.h5"
    data = make(path, chunks=(16, 3, 4), compression="lzf", name="lzf")
    make(path, chunks=(16, 3, 4), fletcher32=True, name="sum")
    src = stoker.sources.HDF5(path, "lzf,sum")
    with h5py.File(path) as f:
        assert chunk_layout(f["lzf"]) is None and chunk_layout(f["sum"]) is None
    rows = np.array([0, 1, 17, 90, 91, 199])
    got = src.read_rows(rows)
    np.testing.assert_array_equal(got["lzf"], data[rows])
    np.testing.assert_array_equal(got["sum"], data[rows])


def test_threads_share_one_cache_within_its_budget(tmp_path):
    path = tmp_path / "f.h5"
    data = make(path, rows=2000, chunks=(16, 3, 4), compression="gzip")
    chunk_bytes = 16 * 12 * 4
    src = stoker.sources.HDF5(path, "x", cache_bytes=40 * chunk_bytes)
    rng = np.random.default_rng(2)
    batches = [np.sort(rng.choice(np.arange(320), 32, replace=False)) for _ in range(200)]  # 20 chunks: all fit
    with cf.ThreadPoolExecutor(4) as pool:
        for rows, got in zip(batches, pool.map(lambda r: src.read_rows(r)["x"], batches)):
            np.testing.assert_array_equal(got, data[rows])
    cache = src._cache  # noqa: SLF001
    lookups = sum(len(np.unique(rows // 16)) for rows in batches)
    assert cache.hits + cache.misses == lookups
    assert cache.misses <= 4 * 20  # each chunk decoded once per thread at most (threads may race on a miss)
    src.read_rows(np.arange(0, 2000, 16))  # 125 chunks through a 40-chunk cache
    assert cache.nbytes <= cache.budget


def test_cache_drops_the_least_recently_used():
    cache = DecodedChunks(budget=3 * 8)
    for k in "abc":
        cache.put(k, np.zeros(1, np.int64))
    cache.get("a")
    cache.put("d", np.zeros(1, np.int64))
    assert cache.get("b") is None and cache.get("a") is not None and cache.nbytes == 24
    cache.put("huge", np.zeros(4, np.int64))  # larger than the budget: not kept
    assert cache.get("huge") is None


def test_loader_over_a_compressed_file_and_close_unmaps(tmp_path):
    path = tmp_path / "f.h5"
    data = make(path, rows=1000, chunks=(32, 3, 4), compression="gzip", shuffle=True)
    with h5py.File(path, "a") as f:
        f["y"] = np.arange(1000)
    src = stoker.sources.HDF5(path, "x,y")
    seen = []
    for batch in stoker.Loader(src, batch_size=64, shuffle="block"):
        np.testing.assert_array_equal(batch["x"].numpy(), data[batch["y"].numpy()])
        seen.append(batch["y"].numpy())
    assert sorted(np.concatenate(seen).tolist()) == list(range(1000))
    src.close()
    with open("/proc/self/maps") as maps:
        assert str(path) not in maps.read()


def test_a_forked_child_builds_its_own_reader(tmp_path):
    path = tmp_path / "f.h5"
    data = make(path, chunks=(16, 3, 4), compression="gzip")
    src = stoker.sources.HDF5(path, "x")
    src.read_rows(np.arange(10))  # the parent's reader and cache exist before the fork
    parent_cache = src._cache  # noqa: SLF001
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        ok = np.array_equal(src.read_rows(np.arange(5, 150, 7))["x"], data[5:150:7]) and src._cache is not parent_cache  # noqa: SLF001
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)


def test_chunks_stored_with_a_filter_skipped(tmp_path):
    """HDF5 stores a chunk unfiltered when an optional filter fails (its filter mask says which)."""
    path = tmp_path / "f.h5"
    rows = _skipped_filter_file(path)
    with h5py.File(path) as f:
        np.testing.assert_array_equal(f["x"][:], rows)  # what HDF5 itself reads
    np.testing.assert_array_equal(stoker.sources.HDF5(path, "x").read_rows(np.arange(0, 64, 3))["x"], rows[::3])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_conversion_decodes_chunks_on_the_writer_threads(tmp_path, layout, monkeypatch):
    import threading

    from stoker.sources import hdf5_chunks

    kw = dict(LAYOUTS[layout])
    dtype = kw.pop("dtype", "<i4")
    path = tmp_path / "f.h5"
    data = make(path, dtype=dtype, rows=500, written=430, **kw)
    threads = set()
    real = hdf5_chunks.ChunkedReader.rows
    monkeypatch.setattr(
        hdf5_chunks.ChunkedReader,
        "rows",
        lambda self, *a: (threads.add(threading.current_thread().name), real(self, *a))[1],
    )
    out = stoker.convert.hdf5(path, tmp_path / "store", keys="x", shard_size=1200, progress=False, workers=2)
    ds = stoker.open(out, verify=True)
    assert ds.num_shards > 3
    np.testing.assert_array_equal(ds[:]["x"], data)
    assert threads and all(name.startswith("stoker-convert-write") for name in threads)


def _skipped_filter_file(path):
    """Four chunks of 16 rows, gzip + shuffle, stored with the filter masks HDF5 may leave: both
    applied, deflate skipped, both skipped, shuffle skipped."""
    import zlib

    rows = np.arange(64 * 4, dtype="<i4").reshape(64, 4)
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("x", (64, 4), dtype="<i4", chunks=(16, 4), compression="gzip", shuffle=True)
        for c in range(4):
            block = rows[c * 16 : (c + 1) * 16]
            shuffled = block.view(np.uint8).reshape(-1, 4).T.tobytes()
            raw, mask = {
                0: (zlib.compress(shuffled), 0),
                1: (shuffled, 0b10),
                2: (block.tobytes(), 0b11),
                3: (zlib.compress(block.tobytes()), 0b01),
            }[c]
            ds.id.write_direct_chunk((c * 16, 0), raw, filter_mask=mask)  # filter 0 is shuffle, 1 deflate
    return rows


@pytest.mark.parametrize("libz", [True, False])
def test_conversion_inflates_whole_chunks_straight_into_the_slab(tmp_path, monkeypatch, libz):
    """Whole chunks whose applied filters are deflate alone, or none, are decoded into the slab
    buffer with no copy (through zlib's C library; Python's zlib where it cannot be loaded)."""
    from stoker.sources import hdf5_chunks

    path = tmp_path / "f.h5"
    rows = _skipped_filter_file(path)
    if not libz:
        monkeypatch.setattr(hdf5_chunks, "_LIBZ", None)
    direct = []
    real = hdf5_chunks.ChunkedReader._decode_into
    monkeypatch.setattr(
        hdf5_chunks.ChunkedReader,
        "_decode_into",
        lambda self, c, out: (direct.append((c, real(self, c, out))), direct[-1][1])[1],
    )
    out = stoker.convert.hdf5(path, tmp_path / "store", keys="x", progress=False, workers=1)
    np.testing.assert_array_equal(stoker.open(out, verify=True)[:]["x"], rows)
    assert sorted(direct) == [(0, False), (1, False), (2, True), (3, libz)]  # shuffle needs a pass of its own


def test_inflate_into_refuses_corrupt_and_mis_sized_data():
    import zlib

    from stoker.sources.hdf5_chunks import _LIBZ, inflate_into

    if _LIBZ is None:
        pytest.skip("zlib's C library cannot be loaded here")
    data = np.arange(1000, dtype=np.int32)
    packed = bytearray(zlib.compress(data.tobytes()))
    out = np.empty_like(data)
    assert inflate_into(bytes(packed), out) and np.array_equal(out, data)
    with pytest.raises(zlib.error, match="corrupt"):
        inflate_into(bytes(packed), np.empty(999, np.int32))  # too small
    with pytest.raises(zlib.error):
        inflate_into(bytes(packed), np.empty(1001, np.int32))  # too large: short
    packed[len(packed) // 2] ^= 0xFF
    with pytest.raises(zlib.error):
        inflate_into(bytes(packed), out)


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_corrupt_chunk_is_named_by_the_loader_and_the_conversion(tmp_path, shuffle):
    """A flipped byte in a stored gzip chunk fails zlib's check: an InputError names the file,
    the dataset, the chunk and its offset (whether decoded into the slab or through a block),
    and the conversion leaves no store behind."""
    path = tmp_path / "f.h5"
    make(path, rows=64, chunks=(16, 3, 4), compression="gzip", shuffle=shuffle)
    with h5py.File(path) as f:
        info = f["x"].id.get_chunk_info(2)
    raw = bytearray(path.read_bytes())
    for k in range(8):
        raw[info.byte_offset + info.size // 2 + k] ^= 0x5A
    path.write_bytes(bytes(raw))
    pattern = rf"f\.h5: dataset 'x': chunk \[2, 0, 0\] \({info.size} bytes at file offset {info.byte_offset}\) cannot be decoded"
    with pytest.raises(stoker.errors.InputError, match=pattern):
        stoker.sources.HDF5(path, "x").read_rows(np.arange(64))
    with pytest.raises(stoker.errors.InputError, match=pattern):
        stoker.convert.hdf5(path, tmp_path / "store", keys="x", progress=False)
    assert not (tmp_path / "store").exists()
