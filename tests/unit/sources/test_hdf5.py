"""stoker.sources.HDF5 and HDF5 conversion."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import stoker
from stoker.errors import SchemaError

h5py = pytest.importorskip("h5py")


@pytest.fixture
def h5(tmp_path):
    path = tmp_path / "data.h5"
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f["data"] = rng.random((500, 3, 4)).astype(np.float32)
        f["labels"] = np.arange(500, dtype=np.int64)
        f.create_dataset("group/chunked", data=np.arange(500, dtype=np.int16) * 3, chunks=(32,), compression="gzip")
        f["short"] = np.arange(7)
        f["names"] = np.array([b"abc"] * 500)
        f.create_dataset("vlen", (500,), dtype=h5py.vlen_dtype(np.int32))
        f.create_dataset("text", data=["x"] * 500, dtype=h5py.string_dtype())
    return path


def test_batches_match_the_file_in_storage_order(h5):
    src = stoker.sources.HDF5(h5, "data,labels,group/chunked")
    assert len(src) == 500
    with h5py.File(h5) as f:
        data = f["data"][:]
    batches = src.read([np.array([9, 3, 400, 3]), np.array([0, 499])])
    assert batches[0]["labels"].tolist() == [3, 3, 9, 400]  # sorted, duplicates kept
    np.testing.assert_array_equal(batches[0]["data"], data[[3, 3, 9, 400]])
    assert batches[1]["group/chunked"].tolist() == [0, 499 * 3]


@pytest.mark.parametrize("shuffle", [False, True, "block"])
def test_loader_reads_every_row_once(h5, shuffle):
    loader = stoker.Loader(stoker.sources.HDF5(h5, ["data", "labels"]), batch_size=64, shuffle=shuffle, num_workers=2, block_size=50, window=2)
    seen = np.concatenate([b["labels"].numpy() for b in loader])
    assert sorted(seen.tolist()) == list(range(500))


def test_contiguous_datasets_are_memory_mapped_and_agree_with_h5py(h5):
    fast = stoker.sources.HDF5(h5, "data,labels,group/chunked")
    slow = stoker.sources.HDF5(h5, "data,labels,group/chunked", mmap=False)
    offsets = {i.key: i.offset for i in fast.infos}
    assert offsets["data"] is not None and offsets["group/chunked"] is None  # chunked+gzip goes through h5py
    chunk = [np.array([499, 0, 250, 3]), np.array([7, 8, 9])]
    for a, b in zip(fast.read(chunk), slow.read(chunk)):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert isinstance(fast._maps["data"], np.memmap) and not slow._maps


def test_big_endian_data_comes_out_native(tmp_path):
    with h5py.File(tmp_path / "be.h5", "w") as f:
        f["x"] = np.arange(10, dtype=">f4")
    got = stoker.sources.HDF5(tmp_path / "be.h5", "x").read([np.array([2, 1])])[0]["x"]
    assert got.dtype == np.dtype("float32") and got.dtype.isnative and got.tolist() == [1.0, 2.0]


def test_dense_rows_read_as_a_slab_and_sparse_as_points(h5):
    src = stoker.sources.HDF5(h5, "labels", dense=2.0, mmap=False)
    assert src.read_rows(np.arange(10, 20))["labels"].tolist() == list(range(10, 20))
    assert src.read_rows(np.array([1, 250, 499]))["labels"].tolist() == [1, 250, 499]
    assert src.read_rows(np.array([10, 12, 13]))["labels"].tolist() == [10, 12, 13]


def test_one_handle_per_thread_and_reopened_after_fork(h5):
    src = stoker.sources.HDF5(h5, "labels", mmap=False)
    handles = []

    def grab():
        handles.append(src._handles.get())

    threads = [threading.Thread(target=grab) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(h) for h in handles}) == 3
    parent = src._handles.get()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must not reuse the parent's handle
        ok = src._handles.get() is not parent and src.read([np.array([5])])[0]["labels"].tolist() == [5]
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"
    src.close()


def test_missing_key_lists_the_keys_present(h5):
    with pytest.raises(SchemaError, match=r"'nope' is not in the file; the datasets present are \['data', 'group/chunked', 'labels'"):
        stoker.sources.HDF5(h5, "data,nope")


def test_a_group_is_not_a_dataset(h5):
    with pytest.raises(SchemaError, match="is a group"):
        stoker.sources.HDF5(h5, "group")


def test_keys_of_different_lengths(h5):
    with pytest.raises(SchemaError, match=r"different numbers of rows \(data: 500, short: 7\)"):
        stoker.sources.HDF5(h5, "data,short")


@pytest.mark.parametrize("key", ["names", "vlen", "text"])
def test_object_string_and_vlen_dtypes_are_refused(h5, key):
    with pytest.raises(SchemaError, match=key):
        stoker.sources.HDF5(h5, key)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no HDF5 file"):
        stoker.sources.HDF5(tmp_path / "none.h5", "x")


def test_convert_keeps_dtypes_shapes_and_values(h5, tmp_path):
    out = stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels,group/chunked", shard_size=4000, progress=False)
    ds = stoker.open(out)
    assert ds.num_shards > 1
    assert ds.schema["data"] == stoker.Tensor("float32", (3, 4))
    assert ds.schema["group/chunked"] == stoker.Scalar("int16")
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(ds[:]["data"], f["data"][:])
        np.testing.assert_array_equal(ds[:]["group/chunked"], f["group/chunked"][:])
    assert ds.metadata["source"]["keys"] == ["data", "labels", "group/chunked"]


def test_convert_refuses_bad_keys_and_leaves_nothing(h5, tmp_path):
    with pytest.raises(SchemaError):
        stoker.convert.hdf5(h5, tmp_path / "store", keys="data,vlen")
    assert not (tmp_path / "store").exists()


@pytest.fixture
def every_file_cold(monkeypatch):
    """Every file counts as cold (not in the page cache) when a conversion opens it."""
    import stoker.sources.mapped_file as mapped_file

    monkeypatch.setattr(mapped_file, "_COLD", 1.01)


def test_cold_conversion_maps_contiguous_datasets_and_reads_ahead(h5, tmp_path, monkeypatch, every_file_cold):
    """Contiguous native datasets of a cold file go through the memory map, each slab read
    ahead with WILLNEED and dropped (DONTNEED) once written; the gzip-chunked one is decoded
    from the same map, its stored chunks read ahead too. Every byte of a mapped dataset is
    asked for once."""
    import stoker.sources.mapped_file as mapped_file

    calls = []
    real = os.posix_fadvise
    monkeypatch.setattr(mapped_file.os, "posix_fadvise", lambda fd, off, n, advice: (calls.append((off, n, advice)), real(fd, off, n, advice)))
    out = stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels,group/chunked", shard_size=4000, progress=False)
    ds = stoker.open(out, verify=True)
    assert ds.num_shards > 2
    with h5py.File(h5) as f:
        for key in ("data", "labels", "group/chunked"):
            np.testing.assert_array_equal(ds[:][key], f[key][:])
        spans = {f[k].id.get_offset(): f[k].id.get_storage_size() for k in ("data", "labels")}
        chunked = f["group/chunked"].id
        infos = [chunked.get_chunk_info(i) for i in range(chunked.get_num_chunks())]
        lo, hi = min(i.byte_offset for i in infos), max(i.byte_offset + i.size for i in infos)
    asked = sorted((off, n) for off, n, advice in calls if advice == os.POSIX_FADV_WILLNEED)
    assert asked == sorted((off, n) for off, n, advice in calls if advice == os.POSIX_FADV_DONTNEED)
    calls = [(off, n, advice) for off, n, advice in calls if advice == os.POSIX_FADV_WILLNEED]
    for start, size in spans.items():
        mine = sorted((off, n) for off, n, _ in calls if start <= off < start + size)
        assert mine[0][0] == start and sum(n for _, n in mine) == size
        assert all(a + n == b for (a, n), (b, _) in zip(mine, mine[1:]))  # slab after slab, no gap or overlap
    others = [(off, n) for off, n, _ in calls if not any(s <= off < s + size for s, size in spans.items())]
    assert others and all(lo <= off and off + n <= hi for off, n in others)  # the chunked dataset's stored bytes
    assert sum(n for _, n in others) <= hi - lo


def test_warm_conversion_does_not_wait_for_its_page_in(h5, tmp_path, monkeypatch):
    """A file in the page cache is paged in ahead, but no writer waits for it (a page-in that
    takes a second per slab does not hold the conversion up), and nothing is dropped after."""
    import stoker.sources.mapped_file as mapped_file

    calls = []
    monkeypatch.setattr(mapped_file.os, "posix_fadvise", lambda *args: calls.append(args[-1]))
    monkeypatch.setattr(mapped_file.MappedFile, "_page_in", lambda self, offset, size: time.sleep(1.0))
    h5.read_bytes()
    t0 = time.perf_counter()
    out = stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels,group/chunked", shard_size=2000, progress=False)
    elapsed = time.perf_counter() - t0
    ds = stoker.open(out, verify=True)
    assert ds.num_shards >= 10 and elapsed < 4.0  # waiting would take >= 1 s a shard
    assert os.POSIX_FADV_DONTNEED not in calls
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(ds[:]["data"], f["data"][:])
        np.testing.assert_array_equal(ds[:]["group/chunked"], f["group/chunked"][:])


def test_page_in_releases_the_gil(tmp_path):
    """MADV_POPULATE_READ runs without the GIL: another thread keeps running while a cold file is read in."""
    from stoker.sources.mapped_file import MappedFile, drop_from_page_cache, page_cache_share

    path = tmp_path / "cold.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 255, 256 * 2**20, dtype=np.uint8).tobytes())
    drop_from_page_cache(path)
    if page_cache_share(path) > 0.1:
        pytest.skip("this filesystem keeps dropped pages cached (tmpfs?): a cold file cannot be made")
    f = MappedFile(path)
    try:
        done, ticks = threading.Event(), []
        thread = threading.Thread(target=lambda: (f.madvise(22, 0, 256 * 2**20), done.set()))
        t0 = time.perf_counter()
        thread.start()
        while not done.is_set():
            time.sleep(0.001)
            ticks.append(time.perf_counter())
        thread.join()
        elapsed = time.perf_counter() - t0
    finally:
        f.close()
    if elapsed < 0.05:
        pytest.skip(f"the disk read 256 MB in {elapsed * 1e3:.0f} ms: too fast to tell")
    gaps = np.diff([t0, *ticks])
    assert gaps.max() < elapsed / 2, f"this thread stood still for {gaps.max() * 1e3:.0f} of {elapsed * 1e3:.0f} ms"


def test_convert_byte_swapped_and_unwritten_datasets(tmp_path):
    """Big-endian (not mappable as stored) and never-written (fill value, no offset) datasets are
    read through h5py beside a mapped one."""
    path = tmp_path / "mixed.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("be", data=np.arange(300, dtype=">i4") * 7)
        f.create_dataset("empty", (300, 2), dtype=np.float32, fillvalue=1.5)
        f["native"] = np.arange(300, dtype=np.uint16)
    out = stoker.convert.hdf5(path, tmp_path / "store", keys="be,empty,native", shard_size=1000, progress=False)
    ds = stoker.open(out, verify=True)
    assert ds.num_shards > 1 and ds.schema["be"] == stoker.Scalar("int32")
    np.testing.assert_array_equal(ds[:]["be"], np.arange(300) * 7)
    np.testing.assert_array_equal(ds[:]["empty"], np.full((300, 2), 1.5, np.float32))
    np.testing.assert_array_equal(ds[:]["native"], np.arange(300))


def test_convert_leaves_the_file_unmapped(h5, tmp_path):
    stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels", shard_size=4000, progress=False)
    with open("/proc/self/maps") as maps:
        assert str(h5) not in maps.read()


def test_convert_without_madvise_populate(h5, tmp_path, monkeypatch):
    """A kernel without MADV_POPULATE_READ (EINVAL) falls back to the writer's page faults."""
    import stoker.sources.mapped_file as mapped_file

    monkeypatch.setattr(mapped_file, "_MADV_POPULATE_READ", 12345)
    out = stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels", shard_size=4000, progress=False)
    ds = stoker.open(out, verify=True)
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(ds[:]["data"], f["data"][:])
        np.testing.assert_array_equal(ds[:]["labels"], f["labels"][:])


@pytest.mark.parametrize("writers", [1, 3])
def test_convert_with_parallel_writers_keeps_row_order(h5, tmp_path, monkeypatch, writers):
    """Shards finish out of order (random delays) and the reused read_direct buffers are not
    overwritten while a writer still holds them: the store equals the file, shard by shard."""
    from stoker.store.shardfile import ShardTask

    rng = np.random.default_rng(5)
    real = ShardTask.write

    def slow(self, columns, first_row=0):
        time.sleep(float(rng.uniform(0, 0.02)))
        return real(self, columns, first_row)

    monkeypatch.setattr(ShardTask, "write", slow)
    out = stoker.convert.hdf5(h5, tmp_path / "store", keys="data,group/chunked", shard_size=1000, progress=False, workers=writers)
    ds = stoker.open(out, verify=True)
    assert ds.num_shards > 10
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(ds[:]["data"], f["data"][:])
        np.testing.assert_array_equal(ds[:]["group/chunked"], f["group/chunked"][:])


def test_convert_failing_midway_leaves_nothing_and_no_threads(h5, tmp_path, monkeypatch):
    from stoker.store.shardfile import ShardTask

    real = ShardTask.write

    def fail_third(self, columns, first_row=0):
        if self.file.endswith("00003.arrow"):
            raise OSError("disk full")
        return real(self, columns, first_row)

    monkeypatch.setattr(ShardTask, "write", fail_third)
    with pytest.raises(OSError, match="disk full"):
        stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels", shard_size=2000, progress=False, workers=2)
    assert sorted(os.listdir(tmp_path)) == ["data.h5"]
    assert not [t for t in threading.enumerate() if t.name.startswith("stoker-convert")]


def test_convert_refuses_zero_writers(h5, tmp_path):
    with pytest.raises(stoker.errors.ConfigError, match="workers must be at least 1"):
        stoker.convert.hdf5(h5, tmp_path / "store", keys="data", workers=0, progress=False)


def test_converting_a_cold_file_leaves_it_out_of_the_page_cache(tmp_path):
    from stoker.sources.mapped_file import drop_from_page_cache, page_cache_share

    path = tmp_path / "big.h5"
    data = np.random.default_rng(3).integers(0, 255, (20_000, 64), dtype=np.uint8)
    with h5py.File(path, "w") as f:
        f["x"] = data
        f.create_dataset("z", data=data[:, 0].astype(np.int16), chunks=(512,), compression="gzip")
    drop_from_page_cache(path)
    if page_cache_share(path) > 0.1:
        pytest.skip("this filesystem keeps dropped pages cached (tmpfs?): a cold file cannot be made")
    out = stoker.convert.hdf5(path, tmp_path / "store", keys="x,z", shard_size=200_000, progress=False)
    assert page_cache_share(path) < 0.2  # the conversion paged the file in, and gave it back
    ds = stoker.open(out, verify=True)
    assert ds.num_shards > 3
    np.testing.assert_array_equal(ds[:]["x"], data)
    np.testing.assert_array_equal(ds[:]["z"], data[:, 0])


def test_converting_a_warm_file_keeps_it_cached(tmp_path):
    from stoker.sources.mapped_file import page_cache_share

    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.ones((20_000, 64), np.uint8)
    path.read_bytes()  # every page cached
    stoker.convert.hdf5(path, tmp_path / "store", keys="x", shard_size=200_000, progress=False)
    assert page_cache_share(path) > 0.9


def test_sampled_page_cache_share_agrees_with_the_full_count(tmp_path):
    from stoker.sources.mapped_file import MappedFile, drop_from_page_cache

    path = tmp_path / "half.bin"
    path.write_bytes(np.ones(96 * 2**20, np.uint8).tobytes())
    drop_from_page_cache(path)
    with open(path, "rb") as f:
        f.read(32 * 2**20)  # the first third cached again (and readahead a little past it)
    mapped = MappedFile(path)
    try:
        full = mapped.resident(0, 96 * 2**20)
        sampled = mapped.resident(0, 96 * 2**20, sample=True)
        tail = mapped.resident(64 * 2**20, 32 * 2**20, sample=True)
    finally:
        mapped.close()
    if full > 0.9:
        pytest.skip("this filesystem keeps dropped pages cached (tmpfs?)")
    assert 0.3 <= full <= 0.45 and abs(sampled - full) < 0.1 and tail < 0.05
