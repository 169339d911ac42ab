import hashlib
import json
import pickle

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, ManifestError, ShardError, StoreNotFoundError


def test_getitem_forms(mixed_store, mixed_columns):
    ds = stoker.open(mixed_store)
    assert ds[-1]["label"] == 299
    np.testing.assert_array_equal(ds[7]["image"], mixed_columns["image"][7])
    b = ds[[299, 0, 150, 0]]
    np.testing.assert_array_equal(b["label"], [299, 0, 150, 0])
    assert b["text"] == [mixed_columns["text"][i] for i in (299, 0, 150, 0)]
    np.testing.assert_array_equal(b["ids"][0], mixed_columns["ids"][299])
    np.testing.assert_array_equal(ds[10:20:3]["label"], [10, 13, 16, 19])
    with pytest.raises(IndexError, match="out of range"):
        ds[300]
    with pytest.raises(IndexError):
        ds[[0, 1000]]
    with pytest.raises(TypeError):
        ds[np.array([0.5])]


def test_gather_into_given_buffer(mixed_store, mixed_columns):
    ds = stoker.open(mixed_store)
    idx = np.array([3, 4, 250, 251])
    out = np.empty((4, 4, 5, 3), np.uint8)
    res = ds.gather(idx, ["image"], out={"image": out})
    assert res["image"] is out
    np.testing.assert_array_equal(out, mixed_columns["image"][idx])
    with pytest.raises(ValueError, match="out buffer"):
        ds.gather(idx, ["image"], out={"image": np.empty((3, 4, 5, 3), np.uint8)})
    with pytest.raises(KeyError, match="no column 'nope'"):
        ds.gather(idx, ["nope"])


def test_unsorted_and_sorted_gathers_agree(mixed_store):
    ds = stoker.open(mixed_store)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(ds), 64)
    a = ds.gather(idx)
    b = ds.gather(np.sort(idx))
    order = np.argsort(idx, kind="stable")
    np.testing.assert_array_equal(a["image"][order], b["image"])
    assert [a["blob"][i] for i in order] == b["blob"]


def test_table_is_whole_store(mixed_store):
    assert stoker.open(mixed_store).table().num_rows == 300


def test_missing_path(tmp_path):
    with pytest.raises(StoreNotFoundError, match="does not exist"):
        stoker.open(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreNotFoundError, match="is a file"):
        stoker.open(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ManifestError, match="no manifest.json"):
        stoker.open(tmp_path / "empty")


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda m: "{not json", "not valid JSON"),
        (lambda m: json.dumps({**m, "version": 99}), "format version 99"),
        (lambda m: json.dumps({**m, "format": "other"}), "not a stoker manifest"),
        (lambda m: json.dumps({**m, "num_rows": 5}), "num_rows=5"),
        (lambda m: json.dumps({k: v for k, v in m.items() if k != "shards"}), "malformed"),
        (
            lambda m: json.dumps({**m, "shards": [{**m["shards"][0], "file": "../x.arrow"}, *m["shards"][1:]]}),
            "outside the store",
        ),
    ],
)
def test_corrupt_manifest(mixed_store, mutate, match):
    path = mixed_store / "manifest.json"
    path.write_text(mutate(json.loads(path.read_text())))
    with pytest.raises(ManifestError, match=match):
        stoker.open(mixed_store)


def test_truncated_shard(mixed_store):
    shard = mixed_store / "shard-00001.arrow"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(ShardError, match="shard-00001.arrow.*truncated"):
        stoker.open(mixed_store)


def test_missing_shard(mixed_store):
    (mixed_store / "shard-00000.arrow").unlink()
    with pytest.raises(ShardError, match="missing"):
        stoker.open(mixed_store)


def test_altered_shard_caught_by_verify(mixed_store):
    _flip_a_byte(mixed_store / "shard-00000.arrow")
    stoker.open(mixed_store)  # same size and valid Arrow: only the checksum can tell
    with pytest.raises(ShardError, match="xxh3_128.*altered"):
        stoker.open(mixed_store, verify=True)


def test_garbage_shard(mixed_store):
    shard = mixed_store / "shard-00000.arrow"
    shard.write_bytes(b"\x00" * shard.stat().st_size)
    ds = stoker.open(mixed_store)  # shards are parsed when first read, not at open
    with pytest.raises(ShardError, match="shard-00000.arrow is not a readable Arrow IPC shard"):
        ds[0]


def test_store_pickles_by_path(mixed_store):
    import pickle

    ds = stoker.open(mixed_store)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.path == ds.path and len(copy) == len(ds)
    np.testing.assert_array_equal(copy[[1, 2]]["image"], ds[[1, 2]]["image"])


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _as_format_1(store):
    """Rewrite a store's manifest the way stoker wrote format 1: version 1, a sha256 per shard."""
    path = store / "manifest.json"
    m = json.loads(path.read_text())
    m["version"] = 1
    del m["checksum"]  # format 1 manifests had no checksum of their own
    for s in m["shards"]:
        del s["xxh3_128"]
        s["sha256"] = hashlib.sha256((store / s["file"]).read_bytes()).hexdigest()
    path.write_text(json.dumps(m))


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


def test_select_is_a_view_in_the_given_order(mixed_store, mixed_columns):
    ds = stoker.open(mixed_store)
    view = ds.select([299, 5, 5, 100])
    assert len(view) == 4 and isinstance(view, stoker.Store)
    np.testing.assert_array_equal(view[0:4]["label"], [299, 5, 5, 100])
    assert view[1]["text"] == mixed_columns["text"][5]
    np.testing.assert_array_equal(view[-1]["image"], mixed_columns["image"][100])
    np.testing.assert_array_equal(view.select([3, 0])[[0, 1]]["label"], [100, 299])  # views compose
    np.testing.assert_array_equal(view.rows, [299, 5, 5, 100])
    assert "rows=4 of 300" in repr(view)
    assert view.table().column("label").to_pylist() == [299, 5, 5, 100]
    with pytest.raises(IndexError):
        view[4]
    with pytest.raises(ConfigError, match=r"indices\[1\] = 300 is out of range"):
        ds.select([0, 300, 400])
    with pytest.raises(ConfigError, match=r"indices\[0\] = 4"):
        view.select([4])


def test_split_parts_partition_the_store(mixed_store):
    ds = stoker.open(mixed_store)
    train, val, test = ds.split([0.8, 0.1, 0.1], seed=1)
    assert [len(p) for p in (train, val, test)] == [240, 30, 30]
    labels = [p[0 : len(p)]["label"] for p in (train, val, test)]
    np.testing.assert_array_equal(np.sort(np.concatenate(labels)), np.arange(300))
    again = ds.split([0.8, 0.1, 0.1], seed=1)
    np.testing.assert_array_equal(again[1][0:30]["label"], labels[1])
    a, b = ds.split([100, 200], shuffle=False)
    np.testing.assert_array_equal(b[0:3]["label"], [100, 101, 102])
    with pytest.raises(ConfigError, match="sum to the 300 rows"):
        ds.split([100, 100])


def test_a_view_pickles_as_the_same_rows(mixed_store):
    view = stoker.open(mixed_store).select([7, 3])
    copy = pickle.loads(pickle.dumps(view))
    np.testing.assert_array_equal(copy[0:2]["label"], [7, 3])


def test_format_2_store_of_ipc_files_still_opens(mixed_store, mixed_columns):
    # a store as format 2 wrote it: shards in the Arrow IPC *file* format, without field metadata
    import pyarrow as pa

    from stoker.store.shardfile import file_checksum

    manifest = json.loads((mixed_store / "manifest.json").read_text())
    for entry in manifest["shards"]:
        path = mixed_store / entry["file"]
        table = pa.ipc.open_stream(pa.BufferReader(path.read_bytes())).read_all()  # in memory: the file is rewritten
        plain = pa.schema([pa.field(f.name, f.type, nullable=False) for f in table.schema])
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, plain) as out:
            out.write_table(table.cast(plain))
        entry["bytes"] = path.stat().st_size
        entry["xxh3_128"] = file_checksum(path, "xxh3_128")
    manifest["version"] = 2
    del manifest["checksum"]  # format 2 manifests had no checksum of their own
    (mixed_store / "manifest.json").write_text(json.dumps(manifest))
    assert (mixed_store / "shard-00000.arrow").read_bytes()[:6] == b"ARROW1"
    ds = stoker.open(mixed_store, verify=True)
    assert ds.manifest.version == 2
    np.testing.assert_array_equal(ds[:]["image"], mixed_columns["image"])
    assert ds[:]["text"] == mixed_columns["text"]
    assert ds.table().num_rows == 300


def test_gather_checks_the_bounds_of_sorted_and_unsorted_rows(tmp_path):
    """Sorted rows are bounded by their first and last; any other order by its min and max."""
    stoker.write(tmp_path / "s", {"x": np.arange(50, dtype=np.int64)}, shard_size=80)
    store = stoker.open(tmp_path / "s")
    for rows in ([3, 4, 50], [-1, 2, 3], [50, 3, 4], [3, -1, 4]):
        with pytest.raises(IndexError, match="out of range"):
            store.gather(np.array(rows))
    np.testing.assert_array_equal(store.gather(np.array([0, 7, 7, 49]))["x"], [0, 7, 7, 49])
    np.testing.assert_array_equal(store.gather(np.array([49, 0, 12]))["x"], [49, 0, 12])
