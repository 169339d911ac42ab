"""Hostile HDF5 input: corrupt chunks, truncated files, strings that are not UTF-8.

Each is a StokerError naming the file and the dataset (and the row or column where known),
never a raw h5py, numpy or torch exception, through the Loader and through convert.hdf5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import InputError

h5py = pytest.importorskip("h5py")
pytestmark = pytest.mark.faults


def _drain(source: stoker.sources.HDF5) -> None:
    for _ in stoker.Loader(source, batch_size=8, num_workers=0):
        pass


def _corrupt_first_chunk(path: Path, key: str) -> None:
    with h5py.File(path, "r") as f:
        info = f[key].id.get_chunk_info(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        fh.write(b"\xde\xad\xbe\xef" * (info.size // 4))


@pytest.mark.parametrize("compression", ["gzip", "lzf"])
def test_a_corrupt_chunk_of_a_compound_table_names_the_dataset_and_rows(tmp_path, compression):
    path = tmp_path / "bad.h5"
    table = np.zeros(64, [("a", "<i8"), ("b", "<f8")])
    table["a"] = np.arange(64)
    with h5py.File(path, "w") as f:
        f.create_dataset("t", data=table, chunks=(16,), compression=compression)
    _corrupt_first_chunk(path, "t")
    # gzip chunks are decoded by stoker (hdf5_chunks), lzf ones by h5py: either way the file and dataset are named
    with pytest.raises(InputError, match=r"bad\.h5: dataset 't': .*(chunk \[0\]|rows 0\.\.\d+).* corrupt"):
        _drain(stoker.sources.HDF5(path, "t"))
    with pytest.raises(InputError, match=r"bad\.h5: dataset 't': .* corrupt"):
        stoker.convert.hdf5(path, tmp_path / "store", keys="t", progress=False)


def test_a_corrupt_chunk_read_through_h5py_names_the_dataset(tmp_path):
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(64.0), chunks=(16,), compression="lzf")
    _corrupt_first_chunk(path, "x")
    with pytest.raises(InputError, match=r"bad\.h5: dataset 'x': h5py cannot read rows"):
        _drain(stoker.sources.HDF5(path, "x", mmap=False))
    with pytest.raises(InputError, match=r"bad\.h5: dataset 'x': h5py cannot read rows"):
        stoker.convert.hdf5(path, tmp_path / "store", keys="x", progress=False)


def test_a_truncated_file_is_refused_at_open(tmp_path):
    path = tmp_path / "cut.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(1000.0)
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(InputError, match=r"cannot open .*cut\.h5 as HDF5.*truncated"):
        stoker.sources.HDF5(path, "x")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(InputError, match="cannot open .*text.h5 as HDF5"):
        stoker.convert.hdf5(tmp_path / "text.h5", tmp_path / "store", progress=False)


def test_a_utf8_string_that_is_not_utf8_names_the_row_and_the_way_out(tmp_path):
    path = tmp_path / "s.h5"
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(4)
    tid.set_cset(h5py.h5t.CSET_UTF8)  # declared UTF-8, holding bytes that are not
    with h5py.File(path, "w") as f:
        ds = h5py.Dataset(h5py.h5d.create(f.id, b"s", tid, h5py.h5s.create_simple((3,))))
        ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([b"ok", b"\xff\xfe", b"fine"], dtype="S4"), mtype=tid)
    with pytest.raises(InputError, match=r"s\.h5: dataset 's', column 's', row 1: the string is not utf-8.*'bytes'"):
        _drain(stoker.sources.HDF5(path, "s"))
    got = stoker.sources.HDF5(path, "s", cast={"s": "bytes"}).read([np.arange(3)])[0]["s"]
    assert got == [b"ok", b"\xff\xfe", b"fine"]
