"""A store's ``manifest.json``: format version, schema, shards (rows, bytes, checksum) and metadata.

:class:`Manifest` reads and writes it and refuses anything malformed with a
:class:`~stoker.errors.ManifestError` naming the file; from format version 4 it carries a checksum of
its own (:func:`manifest_checksum`). The whole format is described in :mod:`stoker.store.format`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import xxhash

from stoker.errors import ManifestError, SchemaError, StoreWriteError
from stoker.store.kinds import Column, is_int
from stoker.store.not_a_store import hint

FORMAT_NAME = "stoker-store"
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
CHECKSUMMED_SINCE = 4  # the first version whose manifest must carry its own checksum
MANIFEST_NAME = "manifest.json"
SHARD_PATTERN = "shard-{:05d}.arrow"

CHECKSUMS = ("xxh3_128", "sha256")  # shard checksum algorithms, by the key the manifest gives them
DEFAULT_CHECKSUM = "xxh3_128"  # what new shards get (sha256: format version 1)


class _ShardFields(NamedTuple):
    file: str
    rows: int
    bytes: int
    checksum: str
    algorithm: str = DEFAULT_CHECKSUM


class ShardInfo(_ShardFields):
    """One shard file as the manifest records it: ``{"file", "rows", "bytes", ALGORITHM: hex}``.

    A named tuple, not a dataclass: a manifest may list 150,000 shards, and opening the store makes
    one of these per shard (a frozen dataclass took 5x as long to build).
    """

    __slots__ = ()

    def __new__(cls, file: str, rows: int, bytes: int, checksum: str, algorithm: str = DEFAULT_CHECKSUM) -> ShardInfo:  # noqa: A002
        if algorithm not in CHECKSUMS:
            raise ValueError(f"shard {file!r}: unknown checksum {algorithm!r}; expected one of {CHECKSUMS}")
        return super().__new__(cls, file, rows, bytes, checksum, algorithm)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "rows": self.rows, "bytes": self.bytes, self.algorithm: self.checksum}

    @classmethod
    def from_json(cls, obj: dict[str, Any], algorithms: tuple[str, ...] = CHECKSUMS) -> ShardInfo:
        """Parse one shard entry; its checksum is under one of ``algorithms`` (KeyError if none)."""
        for algorithm in algorithms:  # (a loop, not a generator: a manifest may list 150,000 shards)
            if algorithm in obj:
                break
        else:
            raise KeyError(f"no checksum ({' or '.join(algorithms)}) for shard {obj.get('file')!r}")
        file, rows, size, checksum = obj["file"], obj["rows"], obj["bytes"], obj[algorithm]
        if type(file) is not str or type(checksum) is not str:
            raise TypeError(f"shard {file!r:.100}: its file name and checksum are strings")
        if not (type(rows) is int and type(size) is int and rows >= 0 and size >= 0):  # not bool, not float
            raise ValueError(f"shard {file!r}: rows and bytes are counts, not {rows!r:.40} and {size!r:.40}")
        if rows > 8 * size:  # every row takes a bit at least (a boolean column), whatever the schema
            raise ValueError(f"shard {file!r}: {rows} rows cannot be held in {size} bytes")
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
            what = hint(directory) or (
                "it is not a stoker store, or its writer was interrupted before finishing (write it again)"
            )
            raise ManifestError(f"{directory} has no {MANIFEST_NAME}: {what}", path=path)
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
        if not is_int(version) or version not in READABLE_VERSIONS:
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
            if not is_int(declared_rows):
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
            if not _plain_name(s.file):
                raise ManifestError(
                    f"{path} names shard {s.file[:80]!r}{'...' if len(s.file) > 80 else ''}: not a file name a store "
                    "writes (control characters, text that is not UTF-8, or over 255 bytes); the store is corrupt",
                    path=path,
                )
            if s.file in seen:
                raise ManifestError(
                    f"{path} lists shard {s.file!r} twice (its rows would be read twice); the store is corrupt",
                    path=path,
                )
            seen.add(s.file)
        _check_own_checksum(obj, version, path)
        return manifest


CHECKSUM_KEY = "checksum"  # the manifest's own checksum (format 4): {"xxh3_128": hex}


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _plain_name(name: str) -> bool:
    """Whether ``name`` is a file name every file system and object store takes: UTF-8, at most 255
    bytes, no control character (a newline, a tab)."""
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return 0 < len(encoded) <= 255 and _CONTROL.search(name) is None


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
