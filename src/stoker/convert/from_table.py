"""Tables (Parquet, CSV/TSV, JSON Lines) into a store (``stoker.convert.table``) through pyarrow, batch by batch.

Arrow types map to store columns: integers, floats and booleans -> scalars; strings
(and dictionary-encoded strings) -> str; binary -> bytes; ``list<number>`` -> a
variable-length sequence; ``fixed_size_list<number>`` (nested too) -> a fixed-shape tensor.
Nulls, dates, structs and other types raise SchemaError naming the column (and the row).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.errors import ConfigError, EmptyDatasetError, SchemaError
from stoker.store.columns import Ragged
from stoker.store.format import Binary, Column, Scalar, String, Tensor
from stoker.store.format import Sequence as SequenceColumn

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "json",
    ".ndjson": "json",
    ".json": "json",
}
BATCH_ROWS = 65536


def table_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in ("parquet", "csv", "json"):
            raise ConfigError(f"format must be 'parquet', 'csv' or 'json', not {fmt!r}", option="format")
        return fmt
    found = FORMATS.get(path.suffix.lower())
    if found is None:
        raise ConfigError(
            f"cannot tell the format of {path} from its suffix; pass format='parquet', 'csv' or 'json'", option="format"
        )
    return found


def _open(path: Path, fmt: str, columns: list[str] | None) -> tuple[pa.Schema, Iterator[pa.RecordBatch], int | None]:
    """(schema of the selected columns, record batches, rows if known)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
        _check_columns(path, schema, columns)
        return _select(schema, columns), pf.iter_batches(batch_size=BATCH_ROWS, columns=columns), pf.metadata.num_rows
    if fmt == "csv":
        import pyarrow.csv as pcsv

        parse = pcsv.ParseOptions(delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        reader = pcsv.open_csv(path, parse_options=parse, read_options=pcsv.ReadOptions(block_size=16 * 2**20))
    else:
        import pyarrow.json as pjson

        reader = pjson.open_json(path, read_options=pjson.ReadOptions(block_size=16 * 2**20))
    schema = reader.schema
    _check_columns(path, schema, columns)

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield batch.select(columns) if columns else batch

    return _select(schema, columns), batches(), None


def _check_columns(path: Path, schema: pa.Schema, columns: list[str] | None) -> None:
    if columns is None:
        return
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise SchemaError(f"{path} has no column {missing[0]!r}; its columns are {schema.names}", column=missing[0])


def _select(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    return pa.schema([schema.field(c) for c in columns]) if columns else schema


def column_for(name: str, t: pa.DataType, path: Path) -> Column:
    """The store column an Arrow type becomes."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        return Scalar(t.to_pandas_dtype())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return String()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return Binary()
    if pa.types.is_fixed_size_list(t):
        shape, inner = [], t
        while pa.types.is_fixed_size_list(inner):
            shape.append(inner.list_size)
            inner = inner.value_type
        if pa.types.is_integer(inner) or pa.types.is_floating(inner) or pa.types.is_boolean(inner):
            return Tensor(inner.to_pandas_dtype(), tuple(shape))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = t.value_type
        if pa.types.is_integer(inner) or pa.types.is_floating(inner) or pa.types.is_boolean(inner):
            return SequenceColumn(inner.to_pandas_dtype())
    raise SchemaError(
        f"{path}: column {name!r} has type {t}, which a store cannot hold; leave it out (columns=...) or convert it "
        "to numbers, strings, bytes or lists of numbers first",
        column=name,
    )


def to_values(name: str, col: Column, arr: pa.Array, first_row: int, path: Path) -> Any:
    """One Arrow column of a record batch as the writer's input for ``col``."""
    if arr.null_count:
        row = first_row + int(pc.index(pc.is_null(arr), True).as_py())
        raise SchemaError(
            f"{path}: column {name!r} is null at row {row}; a store holds no nulls (fill them first, e.g. with "
            "pyarrow.compute.fill_null, or leave the column out)",
            row=row,
            column=name,
        )
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if col.kind == "string" or col.kind == "binary":
        return arr.to_pylist()
    if col.kind == "sequence":
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
        offsets = np.zeros(len(arr) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = pc.list_flatten(arr)
        if values.null_count:
            raise SchemaError(
                f"{path}: column {name!r} has a null inside a list near row {first_row}; fill it first",
                row=first_row,
                column=name,
            )
        return Ragged(values.to_numpy(zero_copy_only=False).astype(col.numpy_dtype, copy=False), offsets)
    if col.shape:
        flat = arr
        while pa.types.is_fixed_size_list(flat.type):
            flat = pc.list_flatten(flat)
        return flat.to_numpy(zero_copy_only=False).astype(col.numpy_dtype, copy=False).reshape(len(arr), *col.shape)
    return arr.to_numpy(zero_copy_only=False).astype(col.numpy_dtype, copy=False)


def convert(
    path: str | os.PathLike[str],
    store: str | os.PathLike[str],
    columns: Sequence[str] | str | None,
    fmt: str | None,
    options: ConvertOptions,
) -> ConvertResult:
    """Convert columns ``columns`` (default: all) of a Parquet, CSV/TSV or JSON Lines file into a store.

    ``fmt``: ``"parquet"``, ``"csv"`` or ``"json"`` (``None``: from the file's suffix).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no table file at {path}")
    fmt = table_format(path, fmt)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    selected = list(columns) if columns is not None else None
    if selected is not None and (not selected or len(set(selected)) != len(selected)):
        raise ConfigError(f"columns must name distinct columns, got {columns!r}", option="columns")
    source = {"kind": "table", "format": fmt, "file": path.name}
    try:
        schema_arrow, batches, rows = _open(path, fmt, selected)
        schema = {f.name: column_for(f.name, f.type, path) for f in schema_arrow}
        writer = options.writer(store, schema, {"source": source})
        with writer, options.bar(rows or 0, f"{fmt} {path.name}") as bar:
            for batch in batches:
                first = writer.rows_written
                values = {
                    f.name: to_values(f.name, schema[f.name], batch.column(i), first, path)
                    for i, f in enumerate(schema_arrow)
                }
                if batch.num_rows:
                    writer.add_batch(values)
                bar.update(batch.num_rows)
            if not writer.rows_written:
                raise EmptyDatasetError(f"{path} has no rows; there is nothing to convert")
            written = writer.rows_written
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SchemaError(
            f"{path} could not be read as {fmt} ({exc}); check the file, or choose columns with columns=..."
        ) from exc
    return ConvertResult(Path(store), written, report={"source": source})
