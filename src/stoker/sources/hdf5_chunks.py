"""Chunked HDF5 datasets read chunk by chunk, decoded here instead of inside h5py.

h5py runs every call behind one lock and decompresses chunks inside it, and its point selection
across many chunks is slower than reading the rows one by one. Here a dataset's chunk index is
built once (``DatasetID.chunk_iter``), stored chunks come from a memory map of the file, worker
threads undo its filters in parallel (``deflate`` with zlib, which releases the GIL; ``shuffle``
with a numpy transpose), and decoded chunks are shared in an LRU cache (``cache_bytes``), so
block-shuffled reads decode each chunk about once per window.

:func:`chunk_layout` says whether a dataset qualifies: chunked, rows of fixed-size values as
stored (``hdf5_types.fixed_layout``), every filter in :data:`DECODERS`, a fill value defined (for
chunks never written), a grid of at most :data:`MAX_CHUNKS` chunks. Others keep the h5py path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import math
import mmap
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import InputError
from stoker.sources.hdf5_types import fixed_layout

FILTER_DEFLATE = 1
FILTER_SHUFFLE = 2
DECODERS = {FILTER_DEFLATE: "deflate", FILTER_SHUFFLE: "shuffle"}
MAX_CHUNKS = 2**22  # chunks of a grid indexed here (20 bytes each); HDF5's own index serves larger ones


@dataclass(frozen=True)
class ChunkLayout:
    """What reading a chunked dataset needs: its shape, chunk shape, stored dtype, filters, fill value."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    file_dtype: np.dtype
    filters: tuple[int, ...]  # in the order HDF5 applied them when writing
    fill: Any

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks))


def chunk_layout(ds: Any) -> ChunkLayout | None:
    """The layout of h5py dataset ``ds`` if this module can read it, else None."""
    import h5py

    if ds.chunks is None or ds.external or ds.ndim == 0 or not fixed_layout(ds):
        return None
    plist = ds.id.get_create_plist()
    filters = tuple(int(plist.get_filter(i)[0]) for i in range(plist.get_nfilters()))
    if any(code not in DECODERS for code in filters):
        return None
    if not hasattr(ds.id, "chunk_iter"):  # h5py < 3.8 or HDF5 < 1.14: no fast chunk index
        return None
    if plist.fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED:  # unwritten chunks are HDF5's to answer for
        return None
    layout = ChunkLayout(
        tuple(int(s) for s in ds.shape), tuple(int(c) for c in ds.chunks), np.dtype(ds.dtype), filters, ds.fillvalue
    )
    return layout if math.prod(layout.grid) <= MAX_CHUNKS else None


class ChunkIndex:
    """File offset, size and filter mask of every stored chunk, over the chunk grid (-1: not stored)."""

    def __init__(self, ds: Any, layout: ChunkLayout) -> None:
        grid = layout.grid
        self.offset = np.full(grid, -1, np.int64)
        self.size = np.zeros(grid, np.int64)
        self.mask = np.zeros(grid, np.uint32)
        chunks = layout.chunks

        def visit(info: Any) -> None:
            at = tuple(o // c for o, c in zip(info.chunk_offset, chunks))
            self.offset[at] = info.byte_offset
            self.size[at] = info.size
            self.mask[at] = info.filter_mask

        ds.id.chunk_iter(visit)

    def span(self, first: int, last: int) -> tuple[int, int] | None:
        """The bytes of the file holding chunk rows ``first .. last`` (axis-0 chunk numbers), as (offset, size)."""
        offsets = self.offset[first : last + 1]
        stored = offsets >= 0
        if not stored.any():
            return None
        lo = int(offsets[stored].min())
        hi = int((offsets + self.size[first : last + 1])[stored].max())
        return lo, hi - lo


class DecodedChunks:
    """Decoded chunks by key, least recently used dropped first past ``budget`` bytes (thread-safe)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.nbytes = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Any, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> np.ndarray | None:
        with self._lock:
            got = self._items.get(key)
            if got is None:
                self.misses += 1
            else:
                self.hits += 1
                self._items.move_to_end(key)
            return got

    def put(self, key: Any, value: np.ndarray) -> None:
        if value.nbytes > self.budget:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self.nbytes += value.nbytes
            while self.nbytes > self.budget:
                _, old = self._items.popitem(last=False)
                self.nbytes -= old.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.nbytes = 0


def chunk_groups(rows: np.ndarray, chunk_rows: int) -> list[tuple[int, int, int]]:
    """Sorted ``rows`` cut by the chunk they fall in: ``(chunk, a, b)`` for ``rows[a:b]``."""
    if not len(rows):
        return []
    which = rows // chunk_rows
    cuts = np.flatnonzero(np.diff(which)) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    stops = np.concatenate((cuts, [len(rows)])).tolist()
    return [(int(which[a]), a, b) for a, b in zip(starts, stops)]


def decode(raw: Any, layout: ChunkLayout, skipped: int) -> np.ndarray:
    """One stored chunk's bytes -> the chunk as an array (chunk shape, stored dtype).

    ``skipped``: HDF5's filter mask, bit ``i`` set when filter ``i`` was not applied to this chunk.
    """
    data: Any = raw
    for i in reversed(range(len(layout.filters))):
        if skipped >> i & 1:
            continue
        if layout.filters[i] == FILTER_DEFLATE:
            data = zlib.decompress(data)
        else:  # shuffle: byte k of every element was stored together, k = 0 .. itemsize-1
            size = layout.file_dtype.itemsize
            if size > 1:
                data = np.frombuffer(data, np.uint8).reshape(size, -1).T.tobytes()
    chunk = np.frombuffer(data, layout.file_dtype).reshape(layout.chunks)
    return chunk.copy() if data is raw else chunk  # never a view of the caller's buffer


def _libz() -> ctypes.CDLL | None:
    """zlib's C library, for inflating straight into a caller's buffer (Python's zlib cannot)."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("z") or "libz.so.1")
        lib.uncompress.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_ulong]
        lib.uncompress.restype = ctypes.c_int
        return lib
    except (OSError, AttributeError):
        return None


_LIBZ = _libz()


def inflate_into(raw: Any, out: np.ndarray) -> bool:
    """Inflate zlib-format bytes ``raw`` into ``out`` (C-contiguous, exactly the inflated size).

    One pass, no intermediate bytes object, the GIL released (ctypes). zlib checks the data's
    Adler-32 as ``zlib.decompress`` does. Returns False, having done nothing, where zlib's C
    library cannot be loaded; raises ``zlib.error`` on corrupt or mis-sized data.
    """
    if _LIBZ is None or not out.flags.c_contiguous:
        return False
    src = np.frombuffer(raw, np.uint8)
    size = ctypes.c_ulong(out.nbytes)
    rc = _LIBZ.uncompress(out.ctypes.data, ctypes.byref(size), src.ctypes.data, len(src))
    if rc != 0 or size.value != out.nbytes:  # Z_OK; Z_DATA_ERROR -3, Z_BUF_ERROR -5, ...
        raise zlib.error(
            f"inflating a chunk failed (zlib code {rc}, {size.value} of {out.nbytes} bytes): is the file corrupt?"
        )
    return True


def chunked_reader(key: str, ds: Any, filemap: mmap.mmap, cache: DecodedChunks) -> ChunkedReader | None:
    """A reader of h5py dataset ``ds`` (column ``key``) from ``filemap``, or None if its layout needs h5py."""
    layout = chunk_layout(ds)
    return None if layout is None else ChunkedReader(key, ds, layout, filemap, cache)


class ChunkedReader:
    """Rows of one chunked dataset: chunks from a memory map of the file, decoded here, cached.

    ``rows(indices)`` takes sorted row numbers and returns them in the native dtype; it is
    thread-safe. The map and the chunk index are this process's: a reader is not pickled.
    """

    def __init__(self, key: str, ds: Any, layout: ChunkLayout, filemap: mmap.mmap, cache: DecodedChunks) -> None:
        self.key = key
        self.path = ds.file.filename  # for error messages
        self.layout = layout
        self.index = ChunkIndex(ds, layout)
        self._map = filemap
        self._cache = cache
        self._dtype = layout.file_dtype.newbyteorder("=")
        self._fill: np.ndarray | None = None
        # Chunks that span whole rows are used as they come; others are pasted into a row block.
        self._whole_rows = layout.chunks[1:] == layout.shape[1:]

    def _chunk(self, at: tuple[int, ...]) -> np.ndarray:
        offset = int(self.index.offset[at])
        if offset < 0:  # never written: the fill value
            if self._fill is None:
                self._fill = np.full(self.layout.chunks, self.layout.fill, self.layout.file_dtype)
            return self._fill
        with self._stored(at) as raw:
            try:
                return decode(raw, self.layout, int(self.index.mask[at]))
            except (zlib.error, ValueError) as exc:
                raise self._corrupt(at, exc) from exc

    def _stored(self, at: tuple[int, ...]) -> memoryview:
        """Chunk ``at``'s stored bytes, a view of the file map (release it: ``with``)."""
        offset = int(self.index.offset[at])
        with memoryview(self._map) as whole:
            return whole[offset : offset + int(self.index.size[at])]

    def _corrupt(self, at: tuple[int, ...], exc: Exception) -> InputError:
        offset, size = int(self.index.offset[at]), int(self.index.size[at])
        return InputError(
            f"{self.path}: dataset {self.key!r}: chunk {list(at)} ({size} bytes at file offset {offset}) cannot be decoded ({exc}); the file is corrupt or truncated",
            path=self.path,
        )

    def _decode_into(self, c: int, out: np.ndarray) -> bool:
        """Decode whole-row chunk ``c`` straight into ``out`` (its rows, stored dtype), if its filters allow."""
        at = (c,) + (0,) * (len(self.layout.shape) - 1)
        if self.index.offset[at] < 0 or out.shape[0] != self.layout.chunks[0]:
            return False  # unwritten (fill value), or an edge chunk: stored at full size, longer than out
        skipped = int(self.index.mask[at])
        applied = [f for i, f in enumerate(self.layout.filters) if not skipped >> i & 1]
        with self._stored(at) as raw:
            if not applied:  # stored as is
                if len(raw) != out.nbytes:
                    return False
                out.reshape(-1).view(np.uint8)[:] = np.frombuffer(raw, np.uint8)
                return True
            try:
                return applied == [FILTER_DEFLATE] and inflate_into(raw, out)
            except zlib.error as exc:
                raise self._corrupt(at, exc) from exc

    def _block(self, c: int) -> np.ndarray:
        """Rows ``c * chunk_rows ...`` of every inner chunk, assembled (stored dtype)."""
        key = (self.key, c)
        got = self._cache.get(key)
        if got is not None:
            return got
        layout = self.layout
        if self._whole_rows:
            block = self._chunk((c,) + (0,) * (len(layout.shape) - 1))
        else:
            block = np.empty((layout.chunks[0], *layout.shape[1:]), layout.file_dtype)
            for inner in itertools.product(*(range(g) for g in layout.grid[1:])):
                chunk = self._chunk((c, *inner))
                spans = [
                    slice(i * n, min((i + 1) * n, s)) for i, n, s in zip(inner, layout.chunks[1:], layout.shape[1:])
                ]
                into, filled = (slice(None), *spans), (slice(None), *(slice(0, sp.stop - sp.start) for sp in spans))
                block[into] = chunk[filled]
        self._cache.put(key, block)
        return block

    def rows(self, indices: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``indices`` (sorted), native byte order, into ``out`` if given."""
        per = self.layout.chunks[0]
        if out is None:
            out = np.empty((len(indices), *self.layout.shape[1:]), self._dtype)
        direct = (
            self._whole_rows
            and not self._cache.budget
            and out.dtype == self.layout.file_dtype
            and out.flags.c_contiguous
        )
        for c, a, b in chunk_groups(indices, per):
            if direct and b - a == per and indices[a] == c * per and indices[b - 1] == c * per + per - 1:
                if self._decode_into(c, out[a:b]):  # a whole chunk, not cached (conversion): no copy
                    continue
            block = self._block(c)
            local = indices[a:b] - c * per
            if b - a == int(local[-1] - local[0]) + 1:  # a run: one slice
                out[a:b] = block[int(local[0]) : int(local[-1]) + 1]
            elif block.dtype == out.dtype:
                np.take(block, local, axis=0, out=out[a:b])
            else:  # stored byte-swapped
                out[a:b] = block[local]
        return out
