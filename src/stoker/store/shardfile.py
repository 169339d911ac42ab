"""One shard file: written with its checksum computed on the way, and checked later.

A shard's checksum is taken over the file's bytes as they are written (the Arrow IPC writer
hands the column buffers to :class:`HashingFile` without a copy; the hash reads each slice
just before the write copies it to the kernel), so the file is never read back to checksum it.

Algorithms (the manifest names one per shard, see ``format.ShardInfo``):

============  =====================================================================
``xxh3_128``  written since store format version 2: xxHash's XXH3, 128 bits, ~20 GB/s
``sha256``    format version 1 stores (still read and verified)
============  =====================================================================
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import xxhash

from stoker.store.format import CHECKSUMS, DEFAULT_CHECKSUM

_SLICE = 4 * 2**20  # hash then write this much at a time, so the write copies bytes the hash just read into cache


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


class HashingFile:
    """A write-only binary file that hashes every byte it writes (for ``pa.PythonFile``).

    Writes go straight to the file descriptor (no Python-side buffering); large buffers are
    hashed and written in slices.
    """

    def __init__(self, path: Path, algorithm: str = DEFAULT_CHECKSUM) -> None:
        self.algorithm = algorithm
        self._hasher = new_hasher(algorithm)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pos = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        n = len(view)
        for start in range(0, n, _SLICE):
            piece = view[start : start + _SLICE]
            self._hasher.update(piece)
            while piece:
                piece = piece[os.write(self._fd, piece) :]
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
    """Write ``batch`` as an Arrow IPC file at ``path``; return (bytes written, checksum)."""
    raw = HashingFile(path, algorithm)
    try:
        with pa.PythonFile(raw, mode="w") as sink, pa.ipc.new_file(sink, batch.schema) as out:
            out.write_batch(batch)
    finally:
        raw.close()
    return raw.tell(), raw.hexdigest()
