"""Turning user values into column chunks: schema inference, validation and casting.

A *chunk* is how the writer buffers n rows of one column:

* tensor: an ndarray of shape ``(n, *shape)`` in the column's dtype;
* sequence: a :class:`Ragged` (flat values + int64 offsets);
* binary / string: a list of ``bytes`` / ``str``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import SchemaError
from stoker.store.format import Binary, Column, Scalar, Sequence, String, Tensor


@dataclass(frozen=True)
class Ragged:
    """Rows of varying length stored flat: row ``i`` is ``values[offsets[i]:offsets[i+1]]``."""

    values: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @classmethod
    def from_rows(cls, rows: list[Any], dtype: Any = None) -> Ragged:
        arrays = [np.asarray(r, dtype=dtype) for r in rows]
        if dtype is None:  # empty rows carry no type: let the others decide (ints stay ints)
            typed = [a for a in arrays if a.size]
            dtype = np.result_type(*typed) if typed else np.int64
            arrays = [a if a.size else np.empty(0, dtype) for a in arrays]
        lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.concatenate([a.reshape(-1) for a in arrays]) if arrays else np.empty(0, dtype or np.int64)
        if dtype is not None:
            values = values.astype(dtype, copy=False)
        return cls(values, offsets)

    def slice(self, start: int, stop: int) -> Ragged:
        off = self.offsets[start : stop + 1]
        return Ragged(self.values[off[0] : off[-1]], off - off[0])


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "numpy")


def as_array(value: Any) -> np.ndarray:
    """numpy view of an ndarray, a torch tensor (moved to CPU) or a nested list of numbers."""
    if isinstance(value, np.ndarray):
        return value
    if _is_torch_tensor(value):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def infer_from_sample(name: str, value: Any) -> Column:
    """The column a single row's value implies."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Binary()
    if isinstance(value, str):
        return String()
    if isinstance(value, (list, tuple)):
        arr = np.asarray(value) if len(value) else np.empty(0, np.int64)
        if arr.ndim != 1 or arr.dtype.kind not in "biuf":
            raise SchemaError(f"column {name!r}: a list in a sample must be a flat list of numbers", column=name)
        return Sequence(arr.dtype)
    if isinstance(value, (bool, int, float, np.generic)) or _is_torch_tensor(value) or isinstance(value, np.ndarray):
        arr = as_array(value)
        _check_numeric(name, arr.dtype)
        return Scalar(arr.dtype) if arr.ndim == 0 else Tensor(arr.dtype, arr.shape)
    raise SchemaError(
        f"column {name!r}: cannot store a value of type {type(value).__name__}; use numbers, arrays, "
        "tensors, lists of numbers, bytes or str",
        column=name,
    )


def infer_from_batch(name: str, values: Any) -> Column:
    """The column a batch of rows implies (first dimension = rows)."""
    if isinstance(values, Ragged):
        return Sequence(values.values.dtype)
    if isinstance(values, np.ndarray) or _is_torch_tensor(values):
        arr = as_array(values)
        if arr.ndim == 0:
            raise SchemaError(f"column {name!r}: a batch needs one value per row, got a 0-d array", column=name)
        _check_numeric(name, arr.dtype)
        return Tensor(arr.dtype, arr.shape[1:])
    if isinstance(values, (list, tuple)):
        if not values:
            raise SchemaError(f"column {name!r} is empty; cannot infer its type (pass schema=)", column=name)
        first = values[0]
        if isinstance(first, (bytes, bytearray, memoryview)):
            return Binary()
        if isinstance(first, str):
            return String()
        if isinstance(first, (list, tuple)) or (as_array(first).ndim == 1 if _arraylike(first) else False):
            return Sequence(_sequence_dtype(values))
        if _arraylike(first) and as_array(first).ndim >= 2:
            return Tensor(as_array(first).dtype, as_array(first).shape)
        return infer_from_batch(name, np.asarray(values))
    raise SchemaError(f"column {name!r}: cannot store a batch of type {type(values).__name__}", column=name)


def _sequence_dtype(rows: list[Any] | tuple[Any, ...]) -> np.dtype:
    """The element type of a list of rows: arrays carry one even when empty, empty lists do not."""
    for row in rows:
        if _arraylike(row):
            return as_array(row).dtype
        if len(row):
            return np.asarray(row).dtype
    return np.dtype(np.int64)


def _arraylike(value: Any) -> bool:
    return isinstance(value, np.ndarray) or _is_torch_tensor(value)


def _check_numeric(name: str, dtype: np.dtype) -> None:
    if dtype.kind not in "biufc":
        raise SchemaError(
            f"column {name!r}: dtype {dtype} cannot be stored as numbers (object or variable-length values); "
            "convert to a numeric dtype, or store bytes/str",
            column=name,
        )


def cast_numbers(name: str, arr: np.ndarray, dtype: np.dtype, first_row: int) -> np.ndarray:
    """``arr`` in ``dtype``; refuses casts that would change values (int overflow, float to int)."""
    if arr.dtype == dtype:
        return arr
    if np.can_cast(arr.dtype, dtype, "safe") or (arr.dtype.kind == "f" and dtype.kind == "f"):
        return arr.astype(dtype)
    if arr.dtype.kind in "biu" and dtype.kind in "biuf":
        if arr.size and dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                raise SchemaError(
                    f"column {name!r}: values in rows {first_row}..{first_row + len(arr) - 1} range "
                    f"{lo}..{hi}, outside {dtype} ({info.min}..{info.max}); declare a wider dtype",
                    column=name,
                    row=first_row,
                )
        return arr.astype(dtype)
    raise SchemaError(
        f"column {name!r}: cannot store {arr.dtype} values in a {dtype} column without changing them "
        f"(rows from {first_row}); convert them first or declare the column as {arr.dtype}",
        column=name,
        row=first_row,
    )


def to_chunk(name: str, col: Column, values: Any, first_row: int) -> Any:
    """Validate a batch of ``values`` against ``col`` and return the writer's chunk."""
    if col.kind == "tensor":
        arr = as_array(values)
        if isinstance(values, (list, tuple)) and values and _arraylike(values[0]):
            arr = np.stack([as_array(v) for v in values])
        if arr.shape[1:] != col.shape:
            raise SchemaError(
                f"column {name!r}: rows from {first_row} have shape {arr.shape[1:]}, the column holds "
                f"{col.shape}; declare it as stoker.Sequence(...) if the length varies",
                column=name,
                row=first_row,
            )
        return np.ascontiguousarray(cast_numbers(name, arr, col.numpy_dtype, first_row))
    if col.kind == "sequence":
        if isinstance(values, Ragged):
            rag = values
        else:
            try:
                rag = Ragged.from_rows([as_array(v) for v in values])
            except ValueError as exc:
                raise SchemaError(
                    f"column {name!r}: rows from {first_row} are not flat lists of numbers ({exc})",
                    column=name,
                    row=first_row,
                ) from exc
            bad = [i for i, v in enumerate(values) if as_array(v).ndim != 1]
            if bad:
                raise SchemaError(
                    f"column {name!r}: row {first_row + bad[0]} is not 1-D", column=name, row=first_row + bad[0]
                )
        _check_numeric(name, rag.values.dtype)
        return Ragged(
            cast_numbers(name, rag.values, col.numpy_dtype, first_row), rag.offsets.astype(np.int64, copy=False)
        )
    expected = bytes if col.kind == "binary" else str
    out = []
    for i, v in enumerate(values):
        if col.kind == "binary" and isinstance(v, (bytearray, memoryview)):
            v = bytes(v)
        if not isinstance(v, expected):
            raise SchemaError(
                f"column {name!r}: row {first_row + i} is {type(v).__name__}, the column holds {expected.__name__}",
                column=name,
                row=first_row + i,
            )
        out.append(v)
    return out


def to_chunks(schema: Mapping[str, Column], columns: Mapping[str, Any], first_row: int) -> tuple[dict[str, Any], int]:
    """Every column of ``schema`` from ``columns`` as a chunk (:func:`to_chunk`), and their one row count.

    Columns other than the schema's, or of different row counts, are a SchemaError naming ``first_row``.
    """
    if set(columns) != set(schema):
        raise SchemaError(
            f"rows from {first_row}: columns {sorted(columns)} do not match the store's {sorted(schema)}",
            row=first_row,
        )
    chunks = {name: to_chunk(name, col, columns[name], first_row) for name, col in schema.items()}
    lengths = {name: len(c) for name, c in chunks.items()}
    if len(set(lengths.values())) > 1:
        raise SchemaError(f"rows from {first_row}: columns have different numbers of rows: {lengths}", row=first_row)
    return chunks, next(iter(lengths.values()), 0)


def chunk_row_bytes(col: Column, chunk: Any) -> np.ndarray:
    """Bytes each row of a chunk takes on disk (int64 array)."""
    n = len(chunk)
    if col.kind == "tensor":
        return np.full(n, col.row_size * col.numpy_dtype.itemsize, dtype=np.int64)
    if col.kind == "sequence":
        return chunk.lengths * chunk.values.dtype.itemsize + 8
    # binary: exact; string: characters, close enough to utf-8 bytes for cutting shards
    return np.fromiter((len(v) + 8 for v in chunk), dtype=np.int64, count=n)


def slice_chunk(chunk: Any, start: int, stop: int) -> Any:
    if isinstance(chunk, Ragged):
        return chunk.slice(start, stop)
    return chunk[start:stop]


def concat_chunks(col: Column, chunks: list[Any]) -> Any:
    if col.kind == "tensor":
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    if col.kind == "sequence":
        if len(chunks) == 1:
            return chunks[0]
        values = np.concatenate([c.values for c in chunks])
        lengths = np.concatenate([c.lengths for c in chunks])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)
    return [v for c in chunks for v in c]


def stack_rows(rows: list[Mapping[str, Any]], schema: Mapping[str, Column], first: int) -> dict[str, Any]:
    """Turn sample dicts (rows ``first``, ``first + 1``, ...) into columns for the writer.

    Tensor columns become one stacked ndarray; sequences, blobs and text stay lists of rows.
    A row whose columns differ from ``schema``, or a tensor whose shape differs from its
    column's, is a ``SchemaError`` naming the row.
    """
    columns: dict[str, list[Any]] = {name: [] for name in schema}
    for i, row in enumerate(rows):
        if row.keys() != columns.keys():
            missing = sorted(set(columns) - set(row))
            extra = sorted(set(row) - set(columns))
            raise SchemaError(
                f"row {first + i} has columns {sorted(row)}, the store has {sorted(columns)} "
                f"(missing {missing}, unexpected {extra})",
                row=first + i,
            )
        for name, value in row.items():
            columns[name].append(value)
    stacked: dict[str, Any] = dict(columns)
    for name, values in columns.items():
        col = schema[name]
        if col.kind == "tensor":
            arrays = [as_array(v) for v in values]
            shapes = {a.shape for a in arrays}
            if len(shapes) > 1:
                bad = next(i for i, a in enumerate(arrays) if a.shape != col.shape)
                raise SchemaError(
                    f"row {first + bad}, column {name!r}: shape {arrays[bad].shape}, the column holds {col.shape}; "
                    f"declare schema={{{name!r}: stoker.Sequence(...)}} if the length varies",
                    row=first + bad,
                    column=name,
                )
            stacked[name] = np.stack(arrays)
    return stacked
