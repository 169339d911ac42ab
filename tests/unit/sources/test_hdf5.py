"""stoker.sources.HDF5: reading datasets of an HDF5 file by rows (conversion: tests/unit/convert/test_from_hdf5.py)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, SchemaError

h5py = pytest.importorskip("h5py")


def test_batches_match_the_file_in_the_order_asked(h5):
    src = stoker.sources.HDF5(h5, "data,labels,group/chunked")
    assert len(src) == 500
    with h5py.File(h5) as f:
        data = f["data"][:]
    batches = src.read([np.array([9, 3, 400, 3]), np.array([0, 499])])
    assert batches[0]["labels"].tolist() == [9, 3, 400, 3]  # the sampler's order, duplicates kept
    np.testing.assert_array_equal(batches[0]["data"], data[[9, 3, 400, 3]])
    assert batches[1]["group/chunked"].tolist() == [0, 499 * 3]


@pytest.mark.parametrize("shuffle", [False, True, "block"])
def test_loader_reads_every_row_once(h5, shuffle):
    loader = stoker.Loader(
        stoker.sources.HDF5(h5, ["data", "labels"]),
        batch_size=64,
        shuffle=shuffle,
        num_workers=2,
        block_size=50,
        window=2,
    )
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
    assert got.dtype == np.dtype("float32") and got.dtype.isnative and got.tolist() == [2.0, 1.0]


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
    with pytest.raises(
        SchemaError, match=r"'nope' is not in the file; the datasets present are \['data', 'group/chunked', 'labels'"
    ):
        stoker.sources.HDF5(h5, "data,nope")


def test_a_group_is_not_a_dataset(h5):
    with pytest.raises(SchemaError, match="is a group"):
        stoker.sources.HDF5(h5, "group")


def test_keys_of_different_lengths(h5):
    with pytest.raises(SchemaError, match=r"different numbers of rows \(data: 500, short: 7\)"):
        stoker.sources.HDF5(h5, "data,short")


def test_string_and_vlen_datasets_become_binary_string_and_sequence_columns(h5):
    source = stoker.sources.HDF5(h5, "names,vlen,text")
    assert {f.name: f.kind for f in source.fields} == {"names": "binary", "vlen": "sequence", "text": "string"}
    batch = source.read([np.array([4, 2])])[0]
    assert batch["names"] == [b"abc", b"abc"] and batch["text"] == ["x", "x"]
    assert batch["vlen"].shape == (2, 0) and batch["vlen_lengths"].tolist() == [0, 0]


def test_object_references_are_refused_naming_the_dataset(tmp_path):
    with h5py.File(tmp_path / "refs.h5", "w") as f:
        f["x"] = np.arange(3)
        f.create_dataset("refs", (3,), dtype=h5py.ref_dtype)
    with pytest.raises(SchemaError, match=r"refs\.h5: dataset 'refs' holds object references"):
        stoker.sources.HDF5(tmp_path / "refs.h5", "refs")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no HDF5 file"):
        stoker.sources.HDF5(tmp_path / "none.h5", "x")


def test_keys_mapping_selects_and_renames(tmp_path):
    path = tmp_path / "nested.h5"
    with h5py.File(path, "w") as f:
        f["train/x"] = np.arange(20, dtype=np.float32).reshape(10, 2)
        f["train/y"] = np.arange(10)
        f["other"] = np.zeros(10)
    source = stoker.sources.HDF5(path, {"train/x": "x", "train/y": "y"})
    batch = next(iter(stoker.Loader(source, batch_size=4)))
    assert set(batch) == {"x", "y"}
    np.testing.assert_array_equal(batch["y"].numpy(), [0, 1, 2, 3])
    assert set(next(iter(stoker.Loader(stoker.sources.HDF5(path, "train/x"), batch_size=2)))) == {"train/x"}
    with pytest.raises(ConfigError, match="two columns the name 'x'"):
        stoker.sources.HDF5(path, {"train/x": "x", "train/y": "x"})
    with pytest.raises(SchemaError, match="'nope' is not in the file"):
        stoker.sources.HDF5(path, {"nope": "x"})
    out = stoker.convert.hdf5(path, tmp_path / "store", {"train/x": "x", "train/y": "y"}, progress=False)
    ds = stoker.open(out)
    assert list(ds.schema) == ["x", "y"]
    np.testing.assert_array_equal(ds[:]["x"], np.arange(20, dtype=np.float32).reshape(10, 2))


def test_an_empty_dataset_is_refused_naming_the_file_and_dataset(tmp_path):
    """Old code: 'the HDF5 has no rows', naming neither the file nor the dataset."""
    from stoker.errors import EmptyDatasetError

    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("features", shape=(0, 4), dtype="float32")
    with pytest.raises(EmptyDatasetError) as err:
        stoker.Loader(stoker.sources.HDF5(path, keys="features"))
    assert str(path) in str(err.value) and "features" in str(err.value)
