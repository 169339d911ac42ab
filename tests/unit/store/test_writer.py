import concurrent.futures as cf
import json
import os

import numpy as np
import pyarrow as pa
import pytest
import torch

import stoker
from stoker.errors import ConfigError, EmptyDatasetError, SchemaError, StoreExistsError
from stoker.store.writer import StoreWriter, parse_size


def test_columns_round_trip(mixed_store, mixed_columns):
    ds = stoker.open(mixed_store)
    assert len(ds) == 300
    assert ds.num_shards > 1
    batch = ds[:]
    np.testing.assert_array_equal(batch["image"], mixed_columns["image"])
    np.testing.assert_array_equal(batch["label"], mixed_columns["label"])
    np.testing.assert_array_equal(batch["score"], mixed_columns["score"])
    assert batch["blob"] == mixed_columns["blob"]
    assert batch["text"] == mixed_columns["text"]
    for got, want in zip(batch["ids"], mixed_columns["ids"]):
        np.testing.assert_array_equal(got, want)


def test_samples_stream_with_inferred_schema(tmp_path):
    rows = (
        {"x": np.full((2, 3), i, np.float32), "y": i, "seq": list(range(i % 4)), "name": f"n{i}", "raw": b"\x00" * i}
        for i in range(2500)
    )
    stoker.write(tmp_path / "s", rows, shard_size="16KB")
    ds = stoker.open(tmp_path / "s")
    assert {k: c.kind for k, c in ds.schema.items()} == {
        "x": "tensor",
        "y": "tensor",
        "seq": "sequence",
        "name": "string",
        "raw": "binary",
    }
    assert ds.schema["seq"].dtype == "int64"  # the first row's empty list does not make it float
    row = ds[2401]
    assert row["y"] == 2401 and row["name"] == "n2401" and row["raw"] == b"\x00" * 2401
    np.testing.assert_array_equal(row["seq"], [0])
    assert ds.num_shards > 2


def test_torch_tensors_and_bool_and_complex(tmp_path):
    stoker.write(
        tmp_path / "t", {"t": torch.arange(12).reshape(6, 2), "b": np.array([True, False] * 3), "c": np.arange(6) * 1j}
    )
    ds = stoker.open(tmp_path / "t")
    assert ds.schema["b"].dtype == "bool"
    np.testing.assert_array_equal(ds[:]["t"], np.arange(12).reshape(6, 2))
    np.testing.assert_array_equal(ds[:]["b"], [True, False] * 3)
    np.testing.assert_array_equal(ds[:]["c"], np.arange(6) * 1j)


def test_store_opens_in_plain_pyarrow(mixed_store, mixed_columns):
    manifest = json.loads((mixed_store / "manifest.json").read_text())
    tables = [pa.ipc.open_stream(str(mixed_store / s["file"])).read_all() for s in manifest["shards"]]
    table = pa.concat_tables(tables)
    assert table.num_rows == 300
    assert table.column("label").to_pylist() == list(range(300))
    assert table.column("text").to_pylist() == mixed_columns["text"]
    assert table.column("ids").to_pylist()[5] == mixed_columns["ids"][5].tolist()


def test_manifest_records_shards(mixed_store):
    m = json.loads((mixed_store / "manifest.json").read_text())
    assert m["format"] == "stoker-store" and m["version"] == 4
    assert sum(s["rows"] for s in m["shards"]) == m["num_rows"] == 300
    for s in m["shards"]:
        assert os.path.getsize(mixed_store / s["file"]) == s["bytes"]
        assert len(s["xxh3_128"]) == 32 and "sha256" not in s


def test_existing_destination_needs_overwrite(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(3)})
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        stoker.write(tmp_path / "s", {"x": np.arange(3)})
    stoker.write(tmp_path / "s", {"x": np.arange(5)}, overwrite=True)
    assert len(stoker.open(tmp_path / "s")) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


def test_failed_write_leaves_nothing(tmp_path):
    def rows():
        for i in range(3000):
            if i == 2500:
                raise RuntimeError("source broke")
            yield {"x": np.zeros(100, np.float32)}

    with pytest.raises(RuntimeError, match="source broke"):
        stoker.write(tmp_path / "s", rows(), shard_size="64KB")
    assert list(tmp_path.iterdir()) == []


def test_killed_writer_leaves_nothing_that_opens(tmp_path):
    w = stoker.StoreWriter(tmp_path / "s", shard_size="8KB")
    for _ in range(1000):
        w.add({"x": np.zeros(64, np.uint8)})
    w.add_batch({"x": np.zeros((10, 64), np.uint8)})  # shards are on disk in the temporary directory now
    leftovers = list(tmp_path.iterdir())
    assert not (tmp_path / "s").exists()
    assert all(p.name.startswith(".s.tmp-") for p in leftovers)
    with pytest.raises(stoker.errors.StoreError):
        stoker.open(leftovers[0])
    w.abort()


def test_schema_mismatch_names_row_and_column(tmp_path):
    rows = [{"x": np.zeros(3), "y": 1}] * 5 + [{"x": np.zeros(4), "y": 1}]
    with pytest.raises(SchemaError, match=r"row 5.*'x'.*Sequence") as info:
        stoker.write(tmp_path / "s", rows)
    assert info.value.row == 5 and info.value.column == "x"
    with pytest.raises(SchemaError, match="row 1 has columns"):
        stoker.write(tmp_path / "s2", [{"x": 1}, {"z": 2}])
    with pytest.raises(SchemaError, match="different numbers of rows"):
        stoker.write(tmp_path / "s3", {"x": np.arange(3), "y": np.arange(4)})


def test_unsafe_casts_are_refused(tmp_path):
    with pytest.raises(SchemaError, match="outside int8"):
        stoker.write(tmp_path / "a", {"x": np.array([1, 300])}, {"x": stoker.Scalar("int8")})
    with pytest.raises(SchemaError, match="float64 values in a int32"):
        stoker.write(tmp_path / "b", {"x": np.array([1.5])}, {"x": stoker.Scalar("int32")})
    stoker.write(tmp_path / "c", {"x": np.array([1, 100])}, {"x": stoker.Scalar("int8")})
    assert stoker.open(tmp_path / "c").schema["x"].dtype == "int8"


def test_unstorable_values(tmp_path):
    with pytest.raises(SchemaError, match="cannot store a value of type dict"):
        stoker.write(tmp_path / "a", [{"x": {"nested": 1}}])
    with pytest.raises(SchemaError, match="object"):
        stoker.write(tmp_path / "b", {"x": np.array([object(), object()])})


def test_empty_data(tmp_path):
    with pytest.raises(EmptyDatasetError):
        stoker.write(tmp_path / "a", [])
    with pytest.raises(EmptyDatasetError):
        stoker.write(tmp_path / "b", {})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text,expected", [(1024, 1024), ("256MB", 256 * 2**20), ("1.5 KiB", 1536), ("2g", 2 * 2**30)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["lots", "-1MB", 0, "12 parsecs", True])
def test_parse_size_rejects(bad):
    with pytest.raises(ConfigError):
        parse_size(bad)


def test_metadata_must_be_json(tmp_path):
    with pytest.raises(ConfigError, match="JSON"):
        stoker.StoreWriter(tmp_path / "s", metadata={"x": object()})
    stoker.write(tmp_path / "s", {"x": np.arange(2)}, metadata={"classes": ["a", "b"]})
    assert stoker.open(tmp_path / "s").metadata == {"classes": ["a", "b"]}


# StoreWriter.reserve_shard / commit_shard: shards written on the caller's threads, recorded in order.

XY_SCHEMA = {"x": stoker.Tensor("float32", (4,)), "y": stoker.Scalar("int64")}


def slabs(n: int, step: int):
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    y = np.arange(n, dtype=np.int64) * 3
    return x, y, [(a, {"x": x[a : a + step], "y": y[a : a + step]}) for a in range(0, n, step)]


def test_shards_written_on_threads_out_of_order_are_recorded_in_order(tmp_path):
    x, y, parts = slabs(1000, 90)
    with StoreWriter(tmp_path / "s", XY_SCHEMA) as w:
        tasks = [w.reserve_shard() for _ in parts]
        with cf.ThreadPoolExecutor(4) as pool:  # finish in reverse order: the commit order is the reservation order
            futures = [pool.submit(t.write, cols, a) for t, (a, cols) in zip(tasks[::-1], parts[::-1])]
            cf.wait(futures)
        for t in tasks:
            w.commit_shard(t)
        assert w.rows_written == 1000
    ds = stoker.open(tmp_path / "s", verify=True)
    assert ds.num_shards == len(parts)
    assert [s.rows for s in ds.manifest.shards] == [len(c["y"]) for _, c in parts]
    np.testing.assert_array_equal(ds[:]["x"], x)
    np.testing.assert_array_equal(ds[:]["y"], y)


def test_rows_added_before_a_reservation_come_first(tmp_path):
    with StoreWriter(tmp_path / "s", XY_SCHEMA) as w:
        w.add({"x": np.zeros(4, np.float32), "y": 7})
        t = w.reserve_shard()
        w.commit_shard(t.write({"x": np.ones((2, 4), np.float32), "y": np.array([8, 9])}, 1))
    assert stoker.open(tmp_path / "s")[:]["y"].tolist() == [7, 8, 9]


def test_misuse_is_refused_and_leaves_no_store(tmp_path):
    w = StoreWriter(tmp_path / "s", XY_SCHEMA)
    a, b = w.reserve_shard(), w.reserve_shard()
    b.write({"x": np.ones((2, 4), np.float32), "y": np.arange(2)})
    with pytest.raises(RuntimeError, match="order reserved"):
        w.commit_shard(b)
    with pytest.raises(RuntimeError, match="not written"):
        w.commit_shard(a)
    with pytest.raises(SchemaError, match="do not match"):
        a.write({"x": np.ones((2, 4), np.float32)})
    with pytest.raises(SchemaError, match="different numbers of rows"):
        a.write({"x": np.ones((2, 4), np.float32), "y": np.arange(3)})
    w.add_batch({"x": np.ones((1, 4), np.float32), "y": np.arange(1)})
    with pytest.raises(RuntimeError, match="reserved shard"):
        w.close()
    assert not (tmp_path / "s").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".s.tmp")]


def test_reserve_needs_a_schema(tmp_path):
    with pytest.raises(SchemaError, match="schema"):
        StoreWriter(tmp_path / "s").reserve_shard()


def test_shards_map_as_hf_datasets_maps_them(mixed_store, mixed_columns):
    # issue 16 item 10: datasets.Dataset.from_file memory-maps a shard and reads it with
    # pa.ipc.open_stream (the IPC *stream* format); `datasets` is not installed here, so its read is
    # done as it does it. Nothing is copied: Arrow allocates no memory for the mapped table.
    shard = mixed_store / "shard-00000.arrow"
    before = pa.total_allocated_bytes()
    table = pa.ipc.open_stream(pa.memory_map(str(shard))).read_all()
    assert pa.total_allocated_bytes() == before
    rows = table.num_rows
    assert table.column("label").to_pylist() == list(range(rows))
    image = np.asarray(table.column("image").chunk(0).flatten()).reshape(rows, 4, 5, 3)
    np.testing.assert_array_equal(image, mixed_columns["image"][:rows])


def test_tensor_fields_carry_shape_and_dtype(tmp_path):
    path = stoker.write(tmp_path / "s", {"x": np.zeros((3, 28, 28), np.uint8), "y": np.arange(3), "b": [True] * 3})
    schema = pa.ipc.open_stream(str(path / "shard-00000.arrow")).schema
    assert schema.field("x").metadata == {b"stoker.shape": b"[28, 28]", b"stoker.dtype": b"uint8"}
    assert schema.field("y").metadata[b"stoker.shape"] == b"[]"
    assert schema.field("b").metadata[b"stoker.dtype"] == b"bool"  # stored as uint8; the dtype says bool
    assert json.loads(schema.field("x").metadata[b"stoker.shape"]) == [28, 28]


def test_a_staging_dir_is_locked_while_a_writer_works_in_it(tmp_path):
    """Issue 15 item 9: a second writer on the same staging dir is refused, naming the first."""
    staging = tmp_path / ".s.partial"
    first = StoreWriter(tmp_path / "s", staging=staging, shard_size=64)
    first.add_batch({"x": np.arange(40)})
    with pytest.raises(stoker.errors.StoreError, match=rf"in use by another conversion .*pid {os.getpid()}, started"):
        StoreWriter(tmp_path / "s", staging=staging)
    first.abort()  # releases the lock, keeps the shards
    second = StoreWriter(tmp_path / "s", staging=staging)
    assert second.rows_written == 40
    second.close()
    assert sorted(p.name for p in (tmp_path / "s").iterdir() if not p.name.startswith("shard-")) == ["manifest.json"]


def test_leftovers_of_dead_writers_are_recovered_or_swept(tmp_path):
    """Issue 15 item 11: a complete hidden store of a dead writer comes back; live writers' dirs stay."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    stoker.write(tmp_path / "d", {"x": np.arange(5)})
    os.rename(tmp_path / "d", tmp_path / f".d.tmp-{pid}-{'a' * 12}")
    (tmp_path / f".d.old-{pid}-{'b' * 12}").mkdir()  # half-deleted: no manifest
    live = tmp_path / f".d.tmp-{os.getppid()}-{'c' * 12}"
    live.mkdir()
    assert stoker.open(tmp_path / "d")[:]["x"].tolist() == list(range(5))  # recovered on open
    stoker.write(tmp_path / "d", {"x": np.arange(3)}, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name, "d"]
