"""One shard file: written with its checksum computed on the way, and checked later.

A shard's checksum is taken over the file's bytes as they are written (the Arrow IPC writer
hands the column buffers to :class:`HashingFile` without a copy; the hash reads each slice
just before the write copies it to the kernel), so the file is never read back to checksum it.

A shard's data is one Arrow record batch (:func:`record_batch` turns column chunks into one).
:class:`ShardTask` is one shard reserved by ``StoreWriter.reserve_shard``: its ``write`` touches no
writer state, so callers may write several shards at once on threads of their own (this
package starts none) and hand them back to ``StoreWriter.commit_shard`` in the order reserved.

Algorithms (the manifest names one per shard, see ``format.ShardInfo``):

============  =====================================================================
``xxh3_128``  written since store format version 2: xxHash's XXH3, 128 bits, ~20 GB/s
``sha256``    format version 1 stores (still read and verified)
============  =====================================================================
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from stoker.errors import SchemaError, StoreWriteError
from stoker.store.columns import to_chunks
from stoker.store.format import CHECKSUMS, DEFAULT_CHECKSUM, Column, ShardInfo, arrow_schema

# Hash then write at most this much at a time, so the write copies bytes the hash just read into
# cache. Slices end at multiples of _SLICE in the file (a multiple of 2 MiB): each aligned 2 MiB of the
# file is written by one write() call, so the kernel can keep it in the page cache as one huge folio
# (Linux >= 6.x file systems with large folios, ext4 among them), and a reader's map of a store just
# written then takes a 2 MiB mapping where it would take 512 page-table entries (fewer TLB misses
# per gathered row; measured in docs/design-notes.md).
_SLICE = 4 * 2**20


def new_hasher(algorithm: str) -> Any:
    if algorithm == "xxh3_128":
        return xxhash.xxh3_128()
    if algorithm == "sha256":
        return hashlib.sha256()
    raise ValueError(f"unknown shard checksum {algorithm!r}; expected one of {CHECKSUMS}")


def file_checksum(path: Path, algorithm: str, block: int = 8 * 2**20) -> str:
    """The checksum of a whole file, read in ``block``-sized pieces."""
    digest = new_hasher(algorithm)
    buf = bytearray(block)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            digest.update(view[:n])
    return digest.hexdigest()


def shard_problem(path: Path, info: ShardInfo, digest: str | None = None) -> str:
    """What is wrong with a shard file (size, then checksum), or "" when it is the manifest's.

    ``digest``: the checksum taken as the file was written; None reads the file to take it.
    """
    size = path.stat().st_size
    if size != info.bytes:
        return f"{size} bytes where the manifest says {info.bytes}"
    if digest is None:
        digest = file_checksum(path, info.algorithm)
    if digest != info.checksum:
        return f"{info.algorithm} {digest[:16]}... where the manifest says {info.checksum[:16]}..."
    return ""


def slices(pos: int, n: int, size: int | None = None) -> list[tuple[int, int]]:
    """``(start, stop)`` pieces of ``n`` bytes written at file offset ``pos``, in order, each ending
    where the file offset reaches a multiple of ``size`` (default :data:`_SLICE`), or at ``n``."""
    size = _SLICE if size is None else size
    out = []
    start = 0
    while start < n:
        stop = min(n, start + size - (pos + start) % size)
        out.append((start, stop))
        start = stop
    return out


class HashingFile:
    """A write-only binary file that hashes every byte it writes (for ``pa.PythonFile``).

    Writes go straight to the file descriptor (no Python-side buffering); large buffers are
    hashed and written in slices. A failed open or write (disk full) is a StoreWriteError naming
    the file (``os.write`` alone names none).
    """

    def __init__(self, path: Path, algorithm: str = DEFAULT_CHECKSUM) -> None:
        self.path = path
        self.algorithm = algorithm
        self._hasher = new_hasher(algorithm)
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, path) from exc
        self._pos = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        n = len(view)
        try:
            for start, stop in slices(self._pos, n):
                piece = view[start:stop]
                self._hasher.update(piece)
                while piece:
                    piece = piece[os.write(self._fd, piece) :]
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, self.path) from exc
        self._pos += n
        return n

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._fd)

    def hexdigest(self) -> str:
        return self._hasher.hexdigest()


def write_batch_file(path: Path, batch: pa.RecordBatch, algorithm: str = DEFAULT_CHECKSUM) -> tuple[int, str]:
    """Write ``batch`` as an Arrow IPC stream at ``path``; return (bytes written, checksum).

    The stream format (format version 3) is what ``datasets.Dataset.from_file`` and
    ``pa.ipc.open_stream`` read; a memory-mapped stream is read without a copy.
    """
    raw = HashingFile(path, algorithm)
    try:
        with pa.PythonFile(raw, mode="w") as sink, pa.ipc.new_stream(sink, batch.schema) as out:
            out.write_batch(batch)
    finally:
        raw.close()
    return raw.tell(), raw.hexdigest()


def _to_arrow(col: Column, chunk: Any) -> pa.Array:
    if col.kind in ("binary", "string"):
        return pa.array(chunk, type=col.arrow_type())
    if col.kind == "sequence":
        values = _flat_to_arrow(col, chunk.values)
        return pa.LargeListArray.from_arrays(pa.array(chunk.offsets, pa.int64()), values)
    flat = _flat_to_arrow(col, chunk.reshape(-1))
    if col.shape == ():
        return flat
    return pa.FixedSizeListArray.from_arrays(flat, col.row_size)


def _flat_to_arrow(col: Column, flat: np.ndarray) -> pa.Array:
    storage = col.storage_dtype
    if storage.kind == "V":
        data = np.ascontiguousarray(flat).view(np.uint8)
        return pa.Array.from_buffers(pa.binary(storage.itemsize), len(flat), [None, pa.py_buffer(data)])
    return pa.array(np.ascontiguousarray(flat).view(storage))


def record_batch(schema: Mapping[str, Column], chunks: Mapping[str, Any]) -> pa.RecordBatch:
    """Column chunks (``store.columns.to_chunk`` output, one per schema column) as one record batch.

    Contiguous numeric chunks become Arrow arrays without a copy.
    """
    arrays = [_to_arrow(col, chunks[name]) for name, col in schema.items()]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(dict(schema)))


@dataclass
class ShardTask:
    """One shard reserved by ``StoreWriter.reserve_shard``, written by :meth:`write`.

    ``write`` may run on any thread; the writer records the shard only when the task comes back
    through ``StoreWriter.commit_shard``.
    """

    file: str
    path: Path
    schema: Mapping[str, Column]
    info: ShardInfo | None = None

    def write(self, columns: Mapping[str, Any], first_row: int = 0) -> ShardTask:
        """Write ``columns`` (name -> values, rows along the first axis) as this shard's one record batch.

        ``first_row`` is the store row of the first value, for error messages.
        """
        chunks, rows = to_chunks(self.schema, columns, first_row)
        if not rows:
            raise SchemaError(f"rows from {first_row}: a shard needs at least one row", row=first_row)
        return self.write_batch(record_batch(self.schema, chunks))

    def write_batch(self, batch: pa.RecordBatch) -> ShardTask:
        size, checksum = write_batch_file(self.path, batch)
        self.info = ShardInfo(self.file, batch.num_rows, size, checksum)
        return self
