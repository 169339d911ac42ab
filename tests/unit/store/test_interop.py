"""A store read by other Arrow tools (issue 32: shards are IPC *streams*, which pyarrow.ipc.open_file,
pyarrow.dataset(format="arrow"), polars.read_ipc/scan_ipc and duckdb refused): ``stoker.export`` writes
IPC files, Parquet or streams with tensor shapes as Arrow types, and ``tensor`` restores a numpy array.

polars, duckdb and HF datasets are not dev dependencies: their tests run where they are installed."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pds
import pytest

import stoker
from stoker.errors import ConfigError, StoreExistsError
from stoker.store.interop import shaped, tensor


@pytest.fixture
def typed_store(tmp_path, mixed_columns):
    """mixed_columns plus a bool tensor (stored as uint8), over several shards."""
    columns = dict(mixed_columns, mask=mixed_columns["image"][:, :, :, 0] > 127)
    stoker.write(tmp_path / "s", columns, shard_size=4096)
    return tmp_path / "s", columns


def _check(table: pa.Table, columns) -> None:
    np.testing.assert_array_equal(tensor(table, "image"), columns["image"])
    mask = tensor(table, "mask")
    assert mask.dtype == np.bool_ and mask.shape == (300, 4, 5)
    np.testing.assert_array_equal(mask, columns["mask"])
    np.testing.assert_array_equal(tensor(table, "label"), columns["label"])
    assert table.column("text").to_pylist() == columns["text"]
    assert table.column("blob").to_pylist() == columns["blob"]
    assert table.column("ids").to_pylist() == [v.tolist() for v in columns["ids"]]


def test_a_shard_is_not_an_ipc_file_but_an_export_is(typed_store, tmp_path):
    path, columns = typed_store
    with pytest.raises(pa.ArrowInvalid):
        pa.ipc.open_file(path / "shard-00000.arrow")  # a stream: why the export exists
    files = stoker.export(path, tmp_path / "out")
    assert len(files) == stoker.open(path).num_shards > 1 and files[0].name == "part-00000.arrow"
    first = pa.ipc.open_file(files[0]).read_all()
    assert first.schema.field("image").type == pa.list_(pa.list_(pa.list_(pa.uint8(), 3), 5), 4)
    table = pds.dataset(tmp_path / "out", format="arrow").to_table()
    _check(table, columns)
    assert [p.name for p in (tmp_path).iterdir() if p.name.startswith(".")] == []  # no hidden work dir left


def test_parquet_and_stream_exports_and_flat_tensors(typed_store, tmp_path):
    path, columns = typed_store
    stoker.export(path, tmp_path / "pq", format="parquet")
    _check(pds.dataset(tmp_path / "pq", format="parquet").to_table(), columns)
    files = stoker.export(stoker.open(path), tmp_path / "st", format="stream", shaped_tensors=False)
    table = pa.Table.from_batches([b for f in files for b in pa.ipc.open_stream(f)])
    assert table.schema.field("image").type == pa.list_(pa.uint8(), 60)  # flat, the shape in the metadata
    _check(table, columns)


def test_pandas_reads_an_export_as_feather(typed_store, tmp_path):
    import pandas as pd  # a dev dependency (with datasets)

    path, columns = typed_store
    files = stoker.export(path, tmp_path / "out")
    frame = pd.concat([pd.read_feather(f) for f in files], ignore_index=True)
    assert frame["label"].tolist() == columns["label"].tolist() and frame["text"].tolist() == columns["text"]


def test_shaped_is_the_store_table_without_a_copy(typed_store):
    path, columns = typed_store
    flat = stoker.open(path).table()
    nested = shaped(flat)
    assert nested.schema.field("image").type == pa.list_(pa.list_(pa.list_(pa.uint8(), 3), 5), 4)
    values = nested.column("image").chunk(0).flatten().flatten().flatten()
    assert values.buffers()[1].address == flat.column("image").chunk(0).flatten().buffers()[1].address
    _check(nested, columns)
    _check(flat, columns)


def test_an_existing_directory_is_kept_unless_overwrite(typed_store, tmp_path):
    path, _ = typed_store
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        stoker.export(path, tmp_path / "out")
    assert (tmp_path / "out" / "mine.txt").exists()
    with pytest.raises(ConfigError, match="format must be one of"):
        stoker.export(path, tmp_path / "other", format="csv")
    with pytest.raises(ConfigError, match="is the store itself"):
        stoker.export(path, path, overwrite=True)
    assert len(stoker.open(path)) == 300
    stoker.export(path, tmp_path / "out", overwrite=True)
    assert (
        sorted(os.listdir(tmp_path / "out"))[0] == "part-00000.arrow" and not (tmp_path / "out" / "mine.txt").exists()
    )


def test_polars_reads_an_export_with_shapes(typed_store, tmp_path):
    import polars as pl  # dev dependencies: a missing one fails, never skips

    path, columns = typed_store
    stoker.export(path, tmp_path / "out")
    frame = pl.scan_ipc(str(tmp_path / "out" / "*.arrow")).collect()
    np.testing.assert_array_equal(frame["image"].to_numpy(), columns["image"])
    assert pl.read_ipc(tmp_path / "out" / "part-00000.arrow")["label"][0] == 0


def test_duckdb_reads_a_parquet_export_and_the_store_table(typed_store, tmp_path):
    import duckdb

    path, columns = typed_store
    stoker.export(path, tmp_path / "pq", format="parquet")
    glob = str(tmp_path / "pq" / "*.parquet")
    assert duckdb.sql(f"SELECT count(*), sum(label) FROM '{glob}'").fetchall() == [(300, sum(range(300)))]
    con = duckdb.connect()
    con.register("store", shaped(stoker.open(path).table()))  # in-process, no file: duckdb scans the Arrow table
    assert con.sql("SELECT max(label) FROM store").fetchall() == [(299,)]


def test_hf_datasets_reads_the_shards_and_a_stream_export(typed_store, tmp_path):
    import datasets

    path, columns = typed_store
    shard = datasets.Dataset.from_file(str(path / "shard-00000.arrow"))  # the store's own streams
    assert shard[0]["label"] == 0
    files = stoker.export(path, tmp_path / "st", format="stream")
    ds = datasets.concatenate_datasets([datasets.Dataset.from_file(str(f)) for f in files]).with_format("numpy")
    np.testing.assert_array_equal(ds[:]["image"], columns["image"])
