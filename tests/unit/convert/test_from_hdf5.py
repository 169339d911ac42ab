"""stoker.convert.hdf5: datasets of an HDF5 file into a store, slab by slab (the ``h5`` file: ../sources/hdf5_files.py)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import stoker
from stoker.errors import SchemaError

h5py = pytest.importorskip("h5py")


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
        stoker.convert.hdf5(h5, tmp_path / "store", keys="data,short")
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
    monkeypatch.setattr(
        mapped_file.os,
        "posix_fadvise",
        lambda fd, off, n, advice: (calls.append((off, n, advice)), real(fd, off, n, advice)),
    )
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
    """A file in the page cache is paged in ahead, but no writer waits for it: the page-in is
    held until the conversion closes the file, after the store is written, and nothing is
    dropped after. (A writer that waited would hold the conversion up until the page-in gave up.)"""
    import stoker.sources.mapped_file as mapped_file
    from stoker.sources.mapped_file import MappedFile

    calls, closed, released_by_close = [], threading.Event(), []
    real_close = MappedFile.close

    def held_page_in(self, offset, size):
        released_by_close.append(closed.wait(timeout=60))
        closed.set()  # a page-in that gave up lets the others go: one failure costs 60 s, not one a slab

    def close(self):
        closed.set()
        real_close(self)

    monkeypatch.setattr(mapped_file.os, "posix_fadvise", lambda *args: calls.append(args[-1]))
    monkeypatch.setattr(MappedFile, "_page_in", held_page_in)
    monkeypatch.setattr(MappedFile, "close", close)
    h5.read_bytes()
    out = stoker.convert.hdf5(h5, tmp_path / "store", keys="data,labels,group/chunked", shard_size=2000, progress=False)
    ds = stoker.open(out, verify=True)
    assert ds.num_shards >= 10
    assert released_by_close and all(released_by_close)  # every page-in that ran was still held when the store was done
    assert os.POSIX_FADV_DONTNEED not in calls
    with h5py.File(h5) as f:
        np.testing.assert_array_equal(ds[:]["data"], f["data"][:])
        np.testing.assert_array_equal(ds[:]["group/chunked"], f["group/chunked"][:])


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
    out = stoker.convert.hdf5(
        h5, tmp_path / "store", keys="data,group/chunked", shard_size=1000, progress=False, workers=writers
    )
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


def test_a_small_file_is_one_shard_whatever_the_writers(tmp_path):
    # issue 16 item 24: a 6-row file became 2 shards (the slab count was rounded up to the writers)
    path = tmp_path / "six.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)
        f["y"] = np.arange(6)
    for workers in (1, 2, 4):
        out = stoker.convert.hdf5(path, tmp_path / f"s{workers}", workers=workers, progress=False)
        ds = stoker.open(out)
        assert ds.num_shards == 1 and len(ds) == 6
        np.testing.assert_array_equal(ds[:]["y"], np.arange(6))
