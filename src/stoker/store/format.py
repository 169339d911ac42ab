"""The on-disk format of a stoker store, written down in one place.

A store is a directory::

    manifest.json          what is below, see Manifest
    shard-00000.arrow      Arrow IPC *stream* format, uncompressed, one record batch
    shard-00001.arrow      ...

Each shard holds one record batch, so that every column of a shard is one contiguous
buffer that can be memory-mapped and viewed as a numpy array without a copy.

Column kinds and their Arrow types (all numbers little-endian):

=========  ===========================================  ==========================
kind       numpy side                                   Arrow type
=========  ===========================================  ==========================
tensor     fixed shape ``(*shape)`` of a numeric dtype  ``dtype`` (shape ``()``) or
                                                        ``fixed_size_list<dtype>[prod(shape)]``
sequence   1-D arrays of varying length (token ids)     ``large_list<dtype>``
binary     bytes of any length (encoded images)         ``large_binary``
string     str                                          ``large_string``
=========  ===========================================  ==========================

``bool`` tensors are stored as ``uint8`` (Arrow packs booleans into bits, which cannot be
viewed without a copy); dtypes without an Arrow counterpart (complex, for instance) are
stored as ``fixed_size_binary`` of their bytes. The manifest keeps the numpy dtype either way.

Tensor fields carry their numpy shape and dtype in the Arrow field metadata (``stoker.shape``:
``b"[28, 28]"``, ``stoker.dtype``: ``b"uint8"``), so Arrow readers (pyarrow, polars) get them
without the manifest.

Format versions: 1 recorded each shard's ``sha256``; 2 records each shard's checksum under the
name of its algorithm (``xxh3_128`` for new shards, computed while the shard is written; see
``shardfile.py``); 3 writes shards in the Arrow IPC *stream* format (1 and 2: the IPC *file*
format), the format ``datasets.Dataset.from_file`` memory-maps, with the field metadata above.
4 adds the manifest's own checksum (``"checksum": {"xxh3_128": hex}``, over the canonical JSON of
every other key, see :func:`manifest_checksum`), so that an edited manifest (a shard listed twice, a
shape changed from ``[4]`` to ``[2, 2]``) is refused at open. All are read (the reader tells the two
shard formats apart by the file's first bytes); a manifest of versions 1-3 has no checksum of its own
(one that does is checked all the same); new stores are written as version 4.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from stoker.errors import ManifestError, SchemaError, StoreWriteError

FORMAT_NAME = "stoker-store"
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
CHECKSUMMED_SINCE = 4  # the first version whose manifest must carry its own checksum
MAX_ROW_ELEMENTS = 2**31 - 1  # an Arrow fixed_size_list holds at most this many values per row
SHAPE_KEY = b"stoker.shape"  # Arrow field metadata of tensor columns: the per-row shape, as JSON
DTYPE_KEY = b"stoker.dtype"  # ... and the numpy dtype name
MANIFEST_NAME = "manifest.json"
SHARD_PATTERN = "shard-{:05d}.arrow"

KINDS = ("tensor", "sequence", "binary", "string")

# numpy dtype name -> Arrow type, for the dtypes Arrow can view without a copy.
_ARROW_NUMERIC = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
}


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
        if shape is not None and not (isinstance(shape, list) and all(_is_int(s) for s in shape)):
            raise TypeError(f"a column shape is a list of integers, not {shape!r:.100}")
        dtype = obj.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            raise TypeError(f"a column dtype is a name, not {dtype!r:.100}")
        return cls(obj["kind"], dtype, None if shape is None else tuple(shape))


def _is_int(value: Any) -> bool:
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


CHECKSUMS = ("xxh3_128", "sha256")  # shard checksum algorithms, by the key the manifest gives them
DEFAULT_CHECKSUM = "xxh3_128"  # what new shards get (sha256: format version 1)


@dataclass(frozen=True)
class ShardInfo:
    """One shard file as the manifest records it: ``{"file", "rows", "bytes", ALGORITHM: hex}``."""

    file: str
    rows: int
    bytes: int
    checksum: str
    algorithm: str = DEFAULT_CHECKSUM

    def __post_init__(self) -> None:
        if self.algorithm not in CHECKSUMS:
            raise ValueError(f"shard {self.file!r}: unknown checksum {self.algorithm!r}; expected one of {CHECKSUMS}")

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "rows": self.rows, "bytes": self.bytes, self.algorithm: self.checksum}

    @classmethod
    def from_json(cls, obj: dict[str, Any], algorithms: tuple[str, ...] = CHECKSUMS) -> ShardInfo:
        """Parse one shard entry; its checksum is under one of ``algorithms`` (KeyError if none)."""
        algorithm = next((a for a in algorithms if a in obj), None)
        if algorithm is None:
            raise KeyError(f"no checksum ({' or '.join(algorithms)}) for shard {obj.get('file')!r}")
        file, rows, size, checksum = obj["file"], obj["rows"], obj["bytes"], obj[algorithm]
        if not isinstance(file, str) or not isinstance(checksum, str):
            raise TypeError(f"shard {file!r:.100}: its file name and checksum are strings")
        if not (_is_int(rows) and _is_int(size) and rows >= 0 and size >= 0):
            raise ValueError(f"shard {file!r}: rows and bytes are counts, not {rows!r:.40} and {size!r:.40}")
        return cls(file, rows, size, checksum, algorithm)


@dataclass(frozen=True)
class Manifest:
    """What manifest.json says: format version, schema, shards and user metadata."""

    schema: dict[str, Column]
    shards: tuple[ShardInfo, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    @property
    def num_rows(self) -> int:
        return sum(s.rows for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON; from version 4 on with its own checksum (``manifest_checksum``)."""
        obj: dict[str, Any] = {
            "format": FORMAT_NAME,
            "version": self.version,
            "num_rows": self.num_rows,
            "columns": {name: col.to_json() for name, col in self.schema.items()},
            "shards": [s.to_json() for s in self.shards],
            "metadata": self.metadata,
        }
        if self.version >= CHECKSUMMED_SINCE:
            obj = json.loads(json.dumps(obj))  # the form a reader will see (tuples as lists, keys as strings)
            obj[CHECKSUM_KEY] = {DEFAULT_CHECKSUM: manifest_checksum(obj)}
        return obj

    def write(self, directory: Path) -> None:
        """Write ``directory/manifest.json``; a failed write (disk full) is a StoreWriteError naming the file."""
        path = directory / MANIFEST_NAME
        text = json.dumps(self.to_json(), indent=2, sort_keys=False)
        try:
            path.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, path) from exc

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        path = directory / MANIFEST_NAME
        if not path.is_file():
            raise ManifestError(
                f"{directory} has no {MANIFEST_NAME}: it is not a stoker store, or its writer was "
                "interrupted before finishing (write it again)",
                path=path,
            )
        try:
            obj = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
        except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise ManifestError(f"{path} is not valid JSON ({exc}); the store is corrupt", path=path) from exc
        except RecursionError as exc:
            raise ManifestError(
                f"{path} is nested too deeply to be a stoker manifest; the store is corrupt", path=path
            ) from exc
        return cls.from_json(obj, path)

    @classmethod
    def from_json(cls, obj: Any, path: Path) -> Manifest:
        if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
            raise ManifestError(f'{path} is not a stoker manifest (no "format": "{FORMAT_NAME}")', path=path)
        version = obj.get("version")
        if not _is_int(version) or version not in READABLE_VERSIONS:
            raise ManifestError(
                f"{path} has format version {version!r}; this stoker reads versions {READABLE_VERSIONS} "
                "(upgrade stoker, or write the store again)",
                path=path,
            )
        try:
            columns, entries = obj["columns"], obj["shards"]
            if not isinstance(columns, dict) or not isinstance(entries, list):
                raise TypeError('"columns" is an object and "shards" a list')
            schema = {str(k): Column.from_json(v) for k, v in columns.items()}
            algorithms = ("sha256",) if version == 1 else CHECKSUMS
            shards = tuple(ShardInfo.from_json(s, algorithms) for s in entries)
            metadata = obj.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise TypeError(f'"metadata" is an object, not {metadata!r:.100}')
            declared_rows = obj["num_rows"]
            if not _is_int(declared_rows):
                raise TypeError(f'"num_rows" is an integer, not {declared_rows!r:.40}')
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, SchemaError) as exc:
            raise ManifestError(
                f"{path} is malformed ({type(exc).__name__}: {exc}); the store is corrupt", path=path
            ) from exc
        manifest = cls(schema, shards, dict(metadata), version)
        if manifest.num_rows != declared_rows:
            raise ManifestError(
                f"{path} says num_rows={declared_rows} but its shards add up to {manifest.num_rows}; the store is corrupt",
                path=path,
            )
        if not schema or not shards:
            raise ManifestError(
                f"{path} lists {len(schema)} columns and {len(shards)} shards; a store has at least one of each "
                "(the store is corrupt: write it again)",
                path=path,
            )
        seen: set[str] = set()
        for s in shards:
            if "/" in s.file or "\\" in s.file or s.file.startswith(".") or "\0" in s.file:
                raise ManifestError(f"{path} names shard {s.file!r} outside the store directory", path=path)
            if s.file in seen:
                raise ManifestError(
                    f"{path} lists shard {s.file!r} twice (its rows would be read twice); the store is corrupt",
                    path=path,
                )
            seen.add(s.file)
        _check_own_checksum(obj, version, path)
        return manifest


CHECKSUM_KEY = "checksum"  # the manifest's own checksum (format 4): {"xxh3_128": hex}


def manifest_checksum(obj: dict[str, Any]) -> str:
    """xxh3_128 of a manifest's canonical JSON (sorted keys, no spaces, ASCII), the ``checksum`` key left out.

    It binds every shard entry to its place in the list and to the schema: a shard listed twice,
    shards swapped or a shape edited all change it.
    """
    body = {k: v for k, v in obj.items() if k != CHECKSUM_KEY}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return xxhash.xxh3_128_hexdigest(canonical.encode("ascii"))


def _check_own_checksum(obj: dict[str, Any], version: int, path: Path) -> None:
    """Compare a manifest's own checksum with its contents; required from version 4, checked where present."""
    own = obj.get(CHECKSUM_KEY)
    if own is None and version < CHECKSUMMED_SINCE:
        return  # a store written before manifests had a checksum of their own
    if not isinstance(own, dict) or not isinstance(own.get(DEFAULT_CHECKSUM), str):
        raise ManifestError(
            f'{path} (format version {version}) has no "{CHECKSUM_KEY}": {{"{DEFAULT_CHECKSUM}": ...}} of its own; '
            "it was edited or damaged (write the store again)",
            path=path,
        )
    if own[DEFAULT_CHECKSUM] != manifest_checksum(obj):
        raise ManifestError(
            f"{path} does not match its own {DEFAULT_CHECKSUM} checksum: it was edited or damaged after it was "
            "written (write the store again, or restore the file)",
            path=path,
        )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys as a dict; a key given twice is a ValueError (the JSON is ambiguous)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def arrow_schema(schema: dict[str, Column]) -> pa.Schema:
    """The Arrow schema of a shard; tensor fields carry their shape and dtype as field metadata."""
    return pa.schema([_field(name, col) for name, col in schema.items()])


def _field(name: str, col: Column) -> pa.Field:
    metadata = None
    if col.kind == "tensor":
        metadata = {SHAPE_KEY: json.dumps(list(col.row_shape)).encode(), DTYPE_KEY: str(col.dtype).encode()}
    return pa.field(name, col.arrow_type(), nullable=False, metadata=metadata)
