"""HDF5 types as columns (sources/hdf5_types.py): compound, sub-array, strings, vlen, byte order, cast, filters.

Each case is read both ways: ``stoker.Loader(sources.HDF5(...))`` and ``convert.hdf5`` -> ``stoker.open``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, SchemaError

h5py = pytest.importorskip("h5py")

N = 37
POS = np.dtype([("x", ">f8"), ("y", "<i2")])
ROW = np.dtype(
    {
        "names": ["id", "pos", "vec", "name"],
        "formats": ["<i4", POS, ("<f4", (3,)), "S6"],
        "offsets": [0, 8, 24, 40],
        "itemsize": 56,  # gaps between the fields
    }
)


def _table() -> np.ndarray:
    t = np.zeros(N, ROW)
    t["id"] = np.arange(N)
    t["pos"]["x"] = np.arange(N) * 0.5
    t["pos"]["y"] = -np.arange(N)
    t["vec"] = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
    t["name"] = [f"n{i}".encode() for i in range(N)]
    return t


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "table.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("t", data=_table(), chunks=(8,), compression="gzip")
        f["labels"] = np.arange(N, dtype=">i8")
    return path


def _loaded(source: stoker.sources.HDF5, **kw) -> dict:
    out: dict = {}
    for batch in stoker.Loader(source, batch_size=5, **kw):
        for name, value in batch.items():
            rows = value if isinstance(value, list) else list(value.numpy())
            out.setdefault(name, []).extend(rows)
    return out


def _converted(path: Path, tmp: Path, keys, **kw) -> dict:
    store = stoker.convert.hdf5(path, tmp / "store", keys=keys, overwrite=True, progress=False, **kw).path
    ds = stoker.open(store)
    return ds.gather(np.arange(len(ds)))


def test_compound_fields_become_columns_nested_with_dots_gaps_skipped(table, tmp_path):
    t = _table()
    src = stoker.sources.HDF5(table, "t,labels")
    kinds = {f.name: (f.kind, f.dtype and f.dtype.name, f.shape) for f in src.fields}
    assert kinds == {
        "t.id": ("tensor", "int32", ()),
        "t.pos.x": ("tensor", "float64", ()),
        "t.pos.y": ("tensor", "int16", ()),
        "t.vec": ("tensor", "float32", (3,)),
        "t.name": ("binary", None, ()),
        "labels": ("tensor", "int64", ()),
    }
    got = _loaded(src)
    store = _converted(table, tmp_path, "t,labels")
    for cols in (got, store):
        np.testing.assert_array_equal(np.asarray(cols["t.id"]), t["id"])
        np.testing.assert_array_equal(np.asarray(cols["t.pos.x"]), t["pos"]["x"])
        np.testing.assert_array_equal(np.asarray(cols["t.pos.y"]), t["pos"]["y"])
        np.testing.assert_array_equal(np.stack(cols["t.vec"]), t["vec"])
        assert list(cols["t.name"]) == [f"n{i}".encode() for i in range(N)]
        np.testing.assert_array_equal(np.asarray(cols["labels"]), np.arange(N))


def test_shuffled_batches_keep_compound_rows_together(table):
    got = _loaded(stoker.sources.HDF5(table, "t"), shuffle=True, seed=1)
    assert sorted(got["t.id"]) == list(range(N))
    for i, name, x in zip(got["t.id"], got["t.name"], got["t.pos.x"]):
        assert name == f"n{i}".encode() and x == i * 0.5


def test_keys_pick_fields_and_a_mapping_renames_the_prefix(table, tmp_path):
    src = stoker.sources.HDF5(table, "t.id,t.pos")
    assert [f.name for f in src.fields] == ["t.id", "t.pos.x", "t.pos.y"]
    batch = next(iter(stoker.Loader(stoker.sources.HDF5(table, {"t.pos": "p", "t.id": "i"}), batch_size=4)))
    assert set(batch) == {"p.x", "p.y", "i"}
    assert list(_converted(table, tmp_path, {"t.vec": "v"})) == ["v"]
    with pytest.raises(SchemaError, match=r"no field 'nope'.*'t\.id'"):
        stoker.sources.HDF5(table, "t.nope")
    with pytest.raises(ConfigError, match="select column 't.id' twice"):
        stoker.sources.HDF5(table, "t,t.id")
    with pytest.raises(ConfigError, match="non-empty string"):
        stoker.sources.HDF5(table, {"t.id": ""})


def test_big_endian_read_through_h5py_comes_out_native(tmp_path):
    """Through h5py (no memory map), big-endian rows reached torch byte-swapped and torch refused them."""
    path = tmp_path / "be.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(20, dtype=">f4")
        f.create_dataset("y", data=np.arange(20, dtype=">i8"), chunks=(4,), compression="lzf")
    got = _loaded(stoker.sources.HDF5(path, "x,y", mmap=False))
    assert np.asarray(got["x"]).tolist() == list(range(20)) and np.asarray(got["y"]).tolist() == list(range(20))
    store = _converted(path, tmp_path, "x,y")
    assert store["y"].dtype == np.dtype("int64") and store["y"].tolist() == list(range(20))


def test_strings_utf8_are_str_ascii_are_bytes_and_cast_decodes(tmp_path):
    path = tmp_path / "s.h5"
    words = ["é", "", "naïve text", "x" * 40]
    with h5py.File(path, "w") as f:
        f.create_dataset("u", data=words, dtype=h5py.string_dtype("utf-8"))
        f.create_dataset("a", data=[b"ab", b"", b"c", b"d\xffe"], dtype=h5py.string_dtype("ascii"))
        f.create_dataset("fixed", data=np.array([b"one", b"two", b"", b"four"], dtype="S5"))
    got = _loaded(stoker.sources.HDF5(path, "u,a,fixed"))
    assert (
        got["u"] == words
        and got["a"] == [b"ab", b"", b"c", b"d\xffe"]
        and got["fixed"] == [b"one", b"two", b"", b"four"]
    )
    store = _converted(path, tmp_path, "u,a,fixed", cast={"fixed": "str"})
    assert store["u"] == words and store["fixed"] == ["one", "two", "", "four"]
    assert stoker.open(tmp_path / "store").schema["fixed"].kind == "string"


def test_vlen_numbers_are_padded_per_batch_with_lengths(tmp_path):
    path = tmp_path / "v.h5"
    rows = [np.arange(k, dtype="<i4") for k in (3, 0, 5, 1, 2, 7)]
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", (len(rows),), dtype=h5py.vlen_dtype(np.dtype("<i4")))
        for i, r in enumerate(rows):
            ds[i] = r
    batches = list(stoker.Loader(stoker.sources.HDF5(path, "v", pad_value=-1), batch_size=3))
    assert batches[0]["v"].tolist() == [[0, 1, 2, -1, -1], [-1] * 5, [0, 1, 2, 3, 4]]
    assert batches[1]["v_lengths"].tolist() == [1, 2, 7]
    wide = next(iter(stoker.Loader(stoker.sources.HDF5(path, "v", pad_to_multiple_of=4), batch_size=3)))
    assert wide["v"].shape == (3, 8) and wide["v"][2].tolist() == [0, 1, 2, 3, 4, 0, 0, 0]
    with pytest.raises(ConfigError, match="pad_to_multiple_of must be an integer >= 1"):
        stoker.sources.HDF5(path, "v", pad_to_multiple_of=0)
    store = _converted(path, tmp_path, "v")
    assert [r.tolist() for r in store["v"]] == [r.tolist() for r in rows]


def test_long_double_is_refused_at_open_and_read_with_cast(tmp_path):
    path = tmp_path / "ld.h5"
    with h5py.File(path, "w") as f:
        f["ld"] = np.arange(9, dtype=np.longdouble) / 4
    with pytest.raises(SchemaError, match=r"ld\.h5: dataset 'ld' has dtype float128.*cast \{'ld': 'float64'\}"):
        stoker.sources.HDF5(path, "ld")
    with pytest.raises(SchemaError, match="float128"):
        stoker.convert.hdf5(path, tmp_path / "store", keys="ld", progress=False)
    got = _loaded(stoker.sources.HDF5(path, "ld", cast={"ld": "float64"}))
    assert np.asarray(got["ld"]).tolist() == [i / 4 for i in range(9)]
    assert _converted(path, tmp_path, "ld", cast={"ld": "float64"})["ld"].dtype == np.float64
    with pytest.raises(ConfigError, match="cast names \\['nope'\\]"):
        stoker.sources.HDF5(path, "ld", cast={"ld": "float64", "nope": "int8"})
    with pytest.raises(ConfigError, match="torch has no tensor"):
        stoker.sources.HDF5(path, "ld", cast={"ld": "float128"})


def test_several_strings_per_row_are_refused_naming_the_field_or_read_as_bytes(tmp_path):
    path = tmp_path / "m.h5"
    data = np.zeros(4, [("k", "<i2"), ("tags", "S3", (2,))])
    data["tags"] = [[b"a", b"bc"]] * 4
    with h5py.File(path, "w") as f:
        f["m"] = data
    with pytest.raises(SchemaError, match=r"dataset 'm', field 'tags' holds \[2\] values of a string per row"):
        stoker.sources.HDF5(path, "m")
    got = stoker.sources.HDF5(path, "m", cast={"m.tags": "uint8"}).read([np.arange(4)])[0]
    assert got["m.tags"].shape == (4, 2, 3) and bytes(got["m.tags"][0, 1]) == b"bc\x00"


def test_chunk_larger_than_the_dataset_is_read(tmp_path):
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(10.0), maxshape=(None,), chunks=(64,), compression="gzip")
    assert np.asarray(_loaded(stoker.sources.HDF5(path, "x"))["x"]).tolist() == list(range(10))
    assert _converted(path, tmp_path, "x")["x"].tolist() == list(range(10))


def test_a_filter_without_its_plugin_is_refused_naming_it(tmp_path):
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:  # an optional filter nobody provides: written unfiltered, listed in the dataset
        f.create_dataset("x", data=np.arange(10), chunks=(5,), compression=32099, allow_unknown_filter=True)
    with pytest.raises(ConfigError, match=r"f\.h5: dataset 'x' is compressed with the HDF5 filter id 32099"):
        stoker.sources.HDF5(path, "x")
    with pytest.raises(ConfigError, match="filter id 32099"):
        stoker.convert.hdf5(path, tmp_path / "store", keys="x", progress=False)


def test_filters_from_hdf5plugin_are_read(tmp_path):
    hdf5plugin = pytest.importorskip("hdf5plugin")
    path = tmp_path / "p.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("z", data=np.arange(100, dtype=">i4"), chunks=(16,), **hdf5plugin.Zstd())
        f.create_dataset("b", data=np.arange(100.0), chunks=(16,), **hdf5plugin.Blosc())
    got = _loaded(stoker.sources.HDF5(path, "z,b"))
    assert np.asarray(got["z"]).tolist() == list(range(100)) and np.asarray(got["b"]).tolist() == list(range(100))
    assert _converted(path, tmp_path, "z,b")["z"].tolist() == list(range(100))


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_compound_strings_and_vlen_through_worker_threads_and_processes(tmp_path, engine):
    path = tmp_path / "w.h5"
    t = np.zeros(60, [("a", "<i4"), ("s", "S5")])
    t["a"], t["s"] = np.arange(60), [b"r%d" % i for i in range(60)]
    with h5py.File(path, "w") as f:
        f["t"] = t
        ds = f.create_dataset("vl", (60,), dtype=h5py.vlen_dtype(np.int32))
        for i in range(60):
            ds[i] = np.arange(i % 7, dtype=np.int32)
        f.create_dataset("u", data=[f"é{i}" for i in range(60)], dtype=h5py.string_dtype())
    loader = stoker.Loader(
        stoker.sources.HDF5(path, "t,vl,u"), batch_size=16, shuffle=True, num_workers=2, engine=engine
    )
    seen = []
    for b in loader:
        for i, s, u, n, row in zip(b["t.a"].tolist(), b["t.s"], b["u"], b["vl_lengths"].tolist(), b["vl"].tolist()):
            assert (s, u, n, row[:n]) == (b"r%d" % i, f"é{i}", i % 7, list(range(i % 7)))
        seen += b["t.a"].tolist()
    assert sorted(seen) == list(range(60))


def _string_type(size: int, pad: int) -> object:
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(size)
    tid.set_strpad(pad)
    return tid


@pytest.mark.parametrize("mmap", [True, False])
def test_compound_rows_from_the_map_or_chunks_equal_h5py_null_terminated_strings_cut(tmp_path, mmap):
    """Compound tables are memory-mapped / chunk-decoded; a NULTERM string field ends at its first NUL
    (what follows is garbage h5py drops), a SPACEPAD one is left to h5py's conversion."""
    path = tmp_path / "nt.h5"
    raw = [b"ab\x00xyz", b"abcdef", b"\x00qqqqq", b"hi\x00\x00\x00\x00"]
    ftype = h5py.h5t.create(h5py.h5t.COMPOUND, 8)
    ftype.insert(b"k", 0, h5py.h5t.STD_I16LE)
    ftype.insert(b"s", 2, _string_type(6, h5py.h5t.STR_NULLTERM))
    mem = np.zeros(4, [("k", "<i2"), ("s", "S6")])
    mem["k"], mem["s"] = np.arange(4), raw
    with h5py.File(path, "w") as f:
        for name, chunks in ((b"contig", None), (b"chunked", (2,))):
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            if chunks:
                dcpl.set_chunk(chunks)
                dcpl.set_deflate(1)
            dsid = h5py.h5d.create(f.id, name, ftype, h5py.h5s.create_simple((4,)), dcpl=dcpl)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, mem, mtype=ftype)  # the bytes as given, garbage included
        sp = f.create_dataset("sp", (4,), dtype=h5py.Datatype(_string_type(4, h5py.h5t.STR_SPACEPAD)))
        sp.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([b"a   ", b"bc d", b"    ", b"e  f"]), mtype=sp.id.get_type())
        want = {key: [bytes(v) for v in f[key]["s"]] for key in ("contig", "chunked")}
        want_sp = [bytes(v) for v in f["sp"][:]]
    assert want["contig"] == want["chunked"] == [b"ab", b"abcdef", b"", b"hi"]
    src = stoker.sources.HDF5(path, "contig,chunked,sp", mmap=mmap)
    infos = {i.key: i for i in src.infos}
    assert infos["contig"].fixed and infos["chunked"].fixed and not infos["sp"].fixed
    if mmap:  # the fast paths are taken
        assert infos["contig"].offset is not None and src._chunk_reader(infos["chunked"]) is not None
    got = src.read([np.arange(4)])[0]
    assert got["contig.s"] == got["chunked.s"] == want["contig"] and got["sp"] == want_sp
    assert got["contig.k"].tolist() == got["chunked.k"].tolist() == [0, 1, 2, 3]
    store = _converted(path, tmp_path, "contig,chunked,sp")
    assert store["contig.s"] == store["chunked.s"] == want["contig"] and store["sp"] == want_sp
    tags = stoker.sources.HDF5(path, "contig", cast={"contig.s": "uint8"}, mmap=mmap).read([np.arange(4)])[0]
    assert bytes(tags["contig.s"][0]) == b"ab\x00\x00\x00\x00"  # bytes after the NUL zeroed, as h5py gives them


def test_long_vlen_rows_are_cut_into_shards_of_about_shard_size(tmp_path):
    """Slabs were sized as if a vlen row held one value: 2,000 rows of 1,000 int32 made one 8 MB shard
    for shard_size='1MB'."""
    path = tmp_path / "long.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", (2000,), dtype=h5py.vlen_dtype(np.int32))
        for i in range(2000):
            ds[i] = np.full(1000, i, np.int32)
        f["y"] = np.arange(2000)
    out = stoker.convert.hdf5(path, tmp_path / "store", keys="v,y", shard_size="1MB", progress=False).path
    shards = sorted(out.glob("shard-*.arrow"))
    assert len(shards) >= 6 and max(p.stat().st_size for p in shards) < 3 * 2**20
    ds = stoker.open(out)
    assert ds[1999]["v"].tolist() == [1999] * 1000 and ds[1999]["y"] == 1999


def test_a_cast_that_would_change_values_is_refused_naming_column_and_rows(tmp_path):
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f["big"] = np.array([1, 2, 300], dtype=np.int64)
        f["frac"] = np.array([1.0, 2.5, 3.0])
        f["z"] = np.array([1 + 0j, 2 + 1j, 3 + 0j])
    for key, cast, words in (("big", "int8", "outside int8"), ("frac", "int32", "not whole"), ("z", "float64", "imag")):
        with pytest.raises(SchemaError, match=rf"dataset '{key}', column '{key}', rows from 0: cast to .*{words}"):
            stoker.sources.HDF5(path, key, cast={key: cast}).read([np.arange(3)])
    ok = stoker.sources.HDF5(path, "big,frac", cast={"big": "int16", "frac": "float32"}).read([np.arange(3)])[0]
    assert ok["big"].tolist() == [1, 2, 300] and ok["frac"].dtype == np.float32
