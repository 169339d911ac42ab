"""Tables into a store."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stoker
from stoker.errors import ConfigError, SchemaError


@pytest.fixture
def parquet(tmp_path):
    t = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "text": ["a", "bb", "ccc"],
            "tokens": [[1, 2], [3], []],
            "vec": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float32(), 2)),
            "blob": [b"x", b"", b"yz"],
            "cat": pa.array(["u", "v", "u"]).dictionary_encode(),
            "gap": [1.0, None, 3.0],
            "when": pa.array([0, 1, 2], pa.timestamp("s")),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(t, path, row_group_size=2)
    return path


def test_parquet_columns_by_name(parquet, tmp_path):
    ds = stoker.open(
        stoker.convert.table(parquet, tmp_path / "s", columns="id,text,tokens,vec,blob,cat", progress=False)
    )
    assert ds.schema == {
        "id": stoker.Scalar("int32"),
        "text": stoker.String(),
        "tokens": stoker.Sequence("int64"),
        "vec": stoker.Tensor("float32", (2,)),
        "blob": stoker.Binary(),
        "cat": stoker.String(),
    }
    row = ds[2]
    assert (row["id"], row["text"], row["tokens"].tolist(), row["vec"].tolist(), row["blob"], row["cat"]) == (
        3,
        "ccc",
        [],
        [5.0, 6.0],
        b"yz",
        "u",
    )


def test_nulls_name_the_column_and_row(parquet, tmp_path):
    with pytest.raises(SchemaError, match=r"column 'gap' is null at row 1"):
        stoker.convert.table(parquet, tmp_path / "s", columns=["id", "gap"])
    assert not (tmp_path / "s").exists()


def test_unsupported_type_and_missing_column(parquet, tmp_path):
    with pytest.raises(SchemaError, match="'when' has type timestamp"):
        stoker.convert.table(parquet, tmp_path / "s", columns=["when"])
    with pytest.raises(SchemaError, match=r"no column 'nope'; its columns are \['id'"):
        stoker.convert.table(parquet, tmp_path / "s", columns=["nope"])


def test_csv_tsv_and_jsonl(tmp_path):
    (tmp_path / "a.csv").write_text("x,y,label\n1,2.5,cat\n3,4.5,dog\n")
    ds = stoker.open(stoker.convert.table(tmp_path / "a.csv", tmp_path / "c", "label,y"))
    assert list(ds.schema) == ["label", "y"] and ds[:]["label"] == ["cat", "dog"]
    (tmp_path / "a.tsv").write_text("x\ty\n1\t2\n")
    assert stoker.open(stoker.convert.table(tmp_path / "a.tsv", tmp_path / "t"))[0]["y"] == 2
    (tmp_path / "a.jsonl").write_text('{"x": 1, "t": [1, 2]}\n{"x": 2, "t": [3]}\n')
    ds = stoker.open(stoker.convert.table(tmp_path / "a.jsonl", tmp_path / "j"))
    assert ds[1]["t"].tolist() == [3]
    np.testing.assert_array_equal(ds[:]["x"], [1, 2])


def test_unknown_suffix(tmp_path):
    (tmp_path / "a.txt").write_text("x\n1\n")
    with pytest.raises(ConfigError, match="format="):
        stoker.convert.table(tmp_path / "a.txt", tmp_path / "s")
    assert stoker.open(stoker.convert.table(tmp_path / "a.txt", tmp_path / "s", format="csv"))[0]["x"] == 1
