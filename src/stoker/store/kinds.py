"""Column kinds of a store: the declared type of a column (:class:`Column`) and its Arrow type.

The four kinds (tensor, sequence, binary, string), their numpy sides and Arrow types are tabled in
:mod:`stoker.store.format`, which describes the whole format. Tensor fields carry their numpy shape
and dtype in the Arrow field metadata (:data:`SHAPE_KEY`, :data:`DTYPE_KEY`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from stoker.errors import SchemaError

MAX_ROW_ELEMENTS = 2**31 - 1  # an Arrow fixed_size_list holds at most this many values per row
SHAPE_KEY = b"stoker.shape"  # Arrow field metadata of tensor columns: the per-row shape, as JSON
DTYPE_KEY = b"stoker.dtype"  # ... and the numpy dtype name

KINDS = ("tensor", "sequence", "binary", "string")

# numpy dtype name -> Arrow type, for the dtypes Arrow can view without a copy.
_NUMERIC = [f"{kind}{bits}" for kind in ("int", "uint") for bits in (8, 16, 32, 64)] + ["float16", "float32", "float64"]
_ARROW_NUMERIC = {name: pa.from_numpy_dtype(np.dtype(name)) for name in _NUMERIC}


def _normalize_dtype(dtype: Any, column: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise SchemaError(f"column {column!r}: {dtype!r} is not a numpy dtype", column=column) from exc
    if dt.hasobject or dt.kind in "OUSV" or dt.fields is not None:
        raise SchemaError(
            f"column {column!r}: dtype {dt} cannot be stored as numbers; use a string, binary or "
            "sequence column, or convert the values to a numeric dtype",
            column=column,
        )
    return dt.newbyteorder("<") if dt.byteorder == ">" else dt


@dataclass(frozen=True)
class Column:
    """The declared type of one column.

    Attributes:
        kind: one of ``tensor``, ``sequence``, ``binary``, ``string``.
        dtype: numpy dtype name of the elements (tensor and sequence), else ``None``.
        shape: the fixed per-row shape of a tensor column (``()`` for a scalar), else ``None``.
    """

    kind: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SchemaError(f"unknown column kind {self.kind!r}; expected one of {KINDS}")
        if self.kind in ("tensor", "sequence"):
            if self.dtype is None:
                raise SchemaError(f"a {self.kind} column needs a dtype")
            object.__setattr__(self, "dtype", _normalize_dtype(self.dtype, "?").name)
        elif self.dtype is not None or self.shape is not None:
            raise SchemaError(f"a {self.kind} column takes no dtype or shape")
        if self.kind == "tensor":
            shape = tuple(int(s) for s in (self.shape or ()))
            if any(s <= 0 for s in shape):
                raise SchemaError(f"tensor shape {shape} must have positive sizes")
            if math.prod(shape) > MAX_ROW_ELEMENTS:
                raise SchemaError(
                    f"tensor shape {list(shape)} has {math.prod(shape):,} values per row; a row holds at most "
                    f"{MAX_ROW_ELEMENTS:,} (store such rows as several rows, or as a binary column)"
                )
            object.__setattr__(self, "shape", shape)
        elif self.shape is not None:
            raise SchemaError("only tensor columns have a shape")

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def row_shape(self) -> tuple[int, ...]:
        """The per-row shape of a tensor column; ``()`` for the other kinds."""
        return self.shape or ()

    @property
    def row_size(self) -> int:
        """Elements per row of a tensor column."""
        return math.prod(self.row_shape)

    @property
    def storage_dtype(self) -> np.dtype:
        """The numpy dtype of the values as they lie in the Arrow buffer."""
        dt = self.numpy_dtype
        if dt == np.bool_:
            return np.dtype(np.uint8)
        if dt.name in _ARROW_NUMERIC:
            return dt
        return np.dtype((np.void, dt.itemsize))

    def arrow_type(self) -> pa.DataType:
        if self.kind == "binary":
            return pa.large_binary()
        if self.kind == "string":
            return pa.large_string()
        dt = self.numpy_dtype
        if dt.name in _ARROW_NUMERIC or dt == np.bool_:
            elem = _ARROW_NUMERIC[self.storage_dtype.name]
        else:
            elem = pa.binary(dt.itemsize)
        if self.kind == "sequence":
            return pa.large_list(elem)
        if self.shape == ():
            return elem
        return pa.list_(elem, self.row_size)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Column:
        """Parse one manifest column entry; a shape must be a list of integers (TypeError if not)."""
        shape = obj.get("shape")
        if shape is not None and not (isinstance(shape, list) and all(is_int(s) for s in shape)):
            raise TypeError(f"a column shape is a list of integers, not {shape!r:.100}")
        dtype = obj.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            raise TypeError(f"a column dtype is a name, not {dtype!r:.100}")
        return cls(obj["kind"], dtype, None if shape is None else tuple(shape))


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def Tensor(dtype: Any, shape: tuple[int, ...] | list[int] = ()) -> Column:  # noqa: N802
    """A column of fixed-shape arrays (``shape=()`` for scalars)."""
    return Column("tensor", np.dtype(dtype).name, tuple(shape))


def Scalar(dtype: Any) -> Column:  # noqa: N802
    """A column of one number per row."""
    return Tensor(dtype, ())


def Sequence(dtype: Any) -> Column:  # noqa: N802
    """A column of 1-D arrays whose length varies from row to row (token ids)."""
    return Column("sequence", np.dtype(dtype).name)


def Binary() -> Column:  # noqa: N802
    """A column of byte strings (encoded images, audio, ...)."""
    return Column("binary")


def String() -> Column:  # noqa: N802
    """A column of text."""
    return Column("string")


Schema = dict  # column name -> Column; a plain ordered dict


def arrow_schema(schema: dict[str, Column]) -> pa.Schema:
    """The Arrow schema of a shard; tensor fields carry their shape and dtype as field metadata."""
    return pa.schema([_field(name, col) for name, col in schema.items()])


def _field(name: str, col: Column) -> pa.Field:
    metadata = None
    if col.kind == "tensor":
        metadata = {SHAPE_KEY: json.dumps(list(col.row_shape)).encode(), DTYPE_KEY: str(col.dtype).encode()}
    return pa.field(name, col.arrow_type(), nullable=False, metadata=metadata)
