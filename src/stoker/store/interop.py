"""A store for other Arrow tools: tensor shapes as Arrow types, and an export to Arrow IPC files or Parquet.

A store's shards are Arrow IPC *streams* (what ``datasets.Dataset.from_file`` memory-maps, and
``pyarrow.ipc.open_stream`` / ``polars.read_ipc_stream`` read), and a tensor column is a flat
``fixed_size_list`` with its shape in the field metadata (``stoker.shape``). Tools that want the IPC
*file* format (``pyarrow.ipc.open_file``, ``pyarrow.dataset(format="arrow")``, ``polars.read_ipc`` /
``scan_ipc``, ``pandas.read_feather``) or Parquet (duckdb's ``FROM 'dir/*.parquet'``) read an export::

    stoker.export("stores/mnist", "exports/mnist")                     # part-00000.arrow, ... (IPC files)
    polars.scan_ipc("exports/mnist/*.arrow")                           # image: Array(UInt8, shape=(28, 28))
    pyarrow.dataset.dataset("exports/mnist", format="arrow")
    stoker.export("stores/mnist", "exports/mnist-pq", format="parquet")
    duckdb.sql("SELECT label, count(*) FROM 'exports/mnist-pq/*.parquet' GROUP BY label")

In one process nothing needs writing: ``shaped(store.table())`` is the store as one memory-mapped
Table (no copy) that ``polars.from_arrow``, ``duckdb.sql("FROM t")`` and ``datasets.Dataset(t)`` take.

Shapes: an exported (or :func:`shaped`) tensor column of shape ``(2, 3)`` is
``fixed_size_list<fixed_size_list<dtype>[3]>[2]`` (polars ``Array(dtype, shape=(2, 3))``, an HF
``List(length=...)`` of lists, duckdb ``FLOAT[3][2]``); :func:`tensor` turns a column of either form
back into one numpy array of shape ``(rows, 2, 3)`` with the store's dtype.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from stoker.errors import ConfigError, StoreExistsError
from stoker.store.kinds import DTYPE_KEY, SHAPE_KEY
from stoker.store.reader import Store
from stoker.store.reader import open as open_store
from stoker.store.replace import check_writable, hidden_dir, remove_tree, replace_dir

FORMATS = {"ipc": ".arrow", "stream": ".arrow", "parquet": ".parquet"}  # export format -> file suffix


def _shape(field: pa.Field) -> tuple[int, ...] | None:
    meta = field.metadata or {}
    return tuple(json.loads(meta[SHAPE_KEY])) if SHAPE_KEY in meta else None


def shaped(table: pa.Table) -> pa.Table:
    """``table`` with each tensor column of two or more dimensions as nested ``fixed_size_list``s of its
    shape (no copy; field metadata kept); other columns as they are."""
    columns, fields = [], []
    for field, column in zip(table.schema, table.columns, strict=True):
        shape = _shape(field)
        if shape is not None and len(shape) > 1 and pa.types.is_fixed_size_list(field.type):
            chunks = [_nest(chunk.flatten(), shape) for chunk in column.chunks]
            column = pa.chunked_array(chunks, type=_nested_type(field.type.value_type, shape))
            field = pa.field(field.name, column.type, field.nullable, field.metadata)
        columns.append(column)
        fields.append(field)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, table.schema.metadata))


def _nested_type(value: pa.DataType, shape: tuple[int, ...]) -> pa.DataType:
    for size in reversed(shape):
        value = pa.list_(value, size)
    return value


def _nest(values: pa.Array, shape: tuple[int, ...]) -> pa.Array:
    for size in reversed(shape):
        values = pa.FixedSizeListArray.from_arrays(values, size)
    return values


def tensor(table: pa.Table, name: str) -> np.ndarray:
    """Column ``name`` of a store's table (``store.table()``, an exported file read by pyarrow, or
    :func:`shaped`) as one array of shape ``(rows, *shape)`` in the store's dtype (``bool``, for
    instance, is stored as ``uint8``); no copy for a column of one chunk."""
    field = table.schema.field(name)
    column = table.column(name)
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    shape = _shape(field)
    if shape is None:  # no metadata (a file written by another tool): the shape from the nested types
        sizes, nested = [], field.type
        while pa.types.is_fixed_size_list(nested):
            sizes.append(nested.list_size)
            nested = nested.value_type
        shape = tuple(sizes)
    while pa.types.is_fixed_size_list(array.type):
        array = array.flatten()
    if array.null_count or not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type)):
        raise ConfigError(f"column {name!r} ({field.type}) is not a tensor column of numbers", option="name")
    kind = np.dtype(array.type.to_pandas_dtype())
    values = np.frombuffer(array.buffers()[1], kind, len(array), array.offset * kind.itemsize)
    dtype = (field.metadata or {}).get(DTYPE_KEY)
    if dtype is not None and np.dtype(dtype.decode()).itemsize == values.dtype.itemsize:
        values = values.view(np.dtype(dtype.decode()))
    return values.reshape((len(column), *shape))


def export(
    store: Store | str | os.PathLike[str],
    directory: str | os.PathLike[str],
    *,
    format: str = "ipc",  # noqa: A002 - the word users know (pandas, pyarrow.dataset)
    shaped_tensors: bool = True,
    overwrite: bool = False,
) -> list[Path]:
    """Write ``store`` (a Store, or the path of a local one: ``stoker.open(url)`` for a URL) into
    ``directory`` as files other Arrow tools read; return their paths.

    ``format``: ``"ipc"`` (Arrow IPC files, ``part-NNNNN.arrow``: pyarrow.dataset ``format="arrow"``,
    polars ``read_ipc``/``scan_ipc``, pandas ``read_feather``), ``"parquet"`` (duckdb, Spark, polars,
    HF ``Dataset.from_parquet``) or ``"stream"`` (IPC streams: HF ``Dataset.from_file``). One file per
    shard (a view's rows are taken first, in memory). ``shaped_tensors``: tensor columns as nested
    fixed-size lists of their shape (see :func:`shaped`); False keeps the flat lists. The files are
    written in a hidden directory beside ``directory`` and moved into place at the end;
    ``overwrite=True`` replaces an existing ``directory``.
    """
    if format not in FORMATS:
        raise ConfigError(f"format must be one of {sorted(FORMATS)}, not {format!r}", option="format")
    source = store if isinstance(store, Store) else open_store(store)
    dest = Path(directory)
    if source.remote is None and dest.resolve() == Path(source.path).resolve():
        raise ConfigError(f"{dest} is the store itself; export it into another directory", option="directory")
    if os.path.lexists(dest) and not overwrite:
        raise StoreExistsError(f"{dest} exists; pass overwrite=True to replace it", path=dest)
    check_writable(dest)
    table = source.table()
    table = shaped(table) if shaped_tensors else table
    tmp = hidden_dir(dest, "tmp")
    tmp.mkdir()
    try:
        batches = table.to_batches()
        names = [f"part-{i:05d}{FORMATS[format]}" for i in range(len(batches))]
        for name, batch in zip(names, batches, strict=True):
            _write(tmp / name, pa.Table.from_batches([batch], table.schema), format)
        replace_dir(tmp, dest, overwrite)
    except BaseException:
        remove_tree(tmp)
        raise
    return [dest / name for name in names]


def _write(path: Path, table: pa.Table, format: str) -> None:  # noqa: A002
    if format == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
        return
    new = pa.ipc.new_file if format == "ipc" else pa.ipc.new_stream
    with pa.OSFile(str(path), "wb") as sink, new(sink, table.schema) as writer:
        writer.write_table(table)


__all__ = ["FORMATS", "export", "shaped", "tensor"]
