"""HDF5 files (h5py) as a batch source, and their columns described for conversion.

``HDF5(path, keys)`` feeds ``stoker.Loader`` straight from the file: each worker thread (and
each process, after a fork) opens its own read-only handle on first use; a chunk of batches
is read with one increasing selection per key. When the rows asked for lie close together
(sequential or block-shuffled order) the covering slab is read in one contiguous call and
the rows are picked from it in memory; scattered rows use h5py's point selection.

Fast paths, which keep h5py (it serializes every call behind one lock) out of the reads:

- a dataset stored contiguously without filters (h5py's default layout: no chunks, no
  compression, not external) is one C-order block of the file at ``ds.id.get_offset()``:
  it is memory-mapped with numpy and gathered with ``np.take``, which releases the GIL;
- a chunked dataset whose filters are gzip and/or shuffle (or none) is read chunk by chunk
  from a memory map and decoded here, in the worker threads, with a shared cache of decoded
  chunks (``hdf5_chunks.py``).

Other datasets (lzf, szip, blosc, fletcher32, external storage) are read through h5py, a
chunk-sized slab at a time; ``mmap=False`` sends every dataset through h5py.
"""

from __future__ import annotations

import mmap as _mmap
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, SchemaError
from stoker.pipeline.columns import check_rows, gather_plan
from stoker.pipeline.names import column_names
from stoker.pipeline.source import BatchSource
from stoker.sources._common import PerThread, check_lengths, check_numeric
from stoker.sources.hdf5_chunks import ChunkedReader, DecodedChunks, chunk_groups, chunk_layout, chunked_reader

DEFAULT_CACHE_BYTES = 256 * 2**20


def _h5py() -> Any:
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("reading HDF5 needs h5py: pip install 'stoker[hdf5]'", option="h5py") from exc
    return h5py


def _close(f: Any) -> None:
    f.close()


@dataclass(frozen=True)
class KeyInfo:
    """One HDF5 dataset used as a column: per-row shape, dtype and chunk rows (0 if contiguous)."""

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunk_rows: int
    offset: int | None = None  # byte offset of a contiguous, unfiltered dataset (memory-mappable)
    file_dtype: np.dtype | None = None  # the dtype as stored (byte order included)

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def parse_keys(keys: str | list[str] | tuple[str, ...] | Mapping[str, str] | None) -> tuple[str, ...] | None:
    """``"data,labels"``, ``["data", "labels"]`` or a mapping's keys -> a tuple; ``None`` stays None (all datasets)."""
    if keys is None:
        return None
    if isinstance(keys, Mapping):
        keys = list(keys)
    if isinstance(keys, str):
        keys = [k.strip() for k in keys.split(",")]
    out = tuple(str(k) for k in keys)
    if not out or any(not k for k in out):
        raise ConfigError(f"keys must name HDF5 datasets, like 'data,labels'; got {keys!r}", option="keys")
    if len(set(out)) != len(out):
        raise ConfigError(f"keys {list(out)} name a dataset twice", option="keys")
    return out


def _datasets_in(f: Any) -> list[str]:
    h5py = _h5py()
    names: list[str] = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def describe(f: Any, path: Path, keys: tuple[str, ...] | None) -> tuple[tuple[KeyInfo, ...], int]:
    """Check ``keys`` in the open file ``f`` and describe them; returns (infos, rows)."""
    h5py = _h5py()
    present = _datasets_in(f)
    if keys is None:
        keys = tuple(present)
        if not keys:
            raise SchemaError(f"{path} holds no datasets")
    infos = []
    for key in keys:
        obj = f.get(key)
        if not isinstance(obj, h5py.Dataset):
            what = "is a group, not a dataset" if obj is not None else "is not in the file"
            raise SchemaError(f"{path}: key {key!r} {what}; the datasets present are {present}", column=key)
        if obj.ndim == 0:
            raise SchemaError(
                f"{path}: dataset {key!r} is a scalar; a column needs one row per entry along its first axis",
                column=key,
            )
        if h5py.check_vlen_dtype(obj.dtype) is not None or h5py.check_string_dtype(obj.dtype) is not None:
            raise SchemaError(
                f"{path}: dataset {key!r} holds variable-length or string values ({obj.dtype}), which stoker cannot "
                "batch as numbers; leave it out of keys, or convert it yourself (stoker.write with a str/bytes column)",
                column=key,
            )
        check_numeric(
            np.dtype(obj.dtype), f"{path}: dataset {key!r}", "leave it out of keys, or convert it to a numeric dtype"
        )
        chunk_rows = obj.chunks[0] if obj.chunks else 0
        offset = None
        if obj.chunks is None and obj.compression is None and not obj.external and obj.dtype.kind in "biufc":
            offset = obj.id.get_offset()  # None while no data was ever written (all fill value)
        dtype = np.dtype(obj.dtype)
        infos.append(KeyInfo(key, tuple(obj.shape[1:]), dtype.newbyteorder("="), int(chunk_rows), offset, dtype))
    rows = check_lengths({info.key: len(f[info.key]) for info in infos}, f"{path}")
    return tuple(infos), rows


class HDF5(BatchSource):
    """Batches straight from datasets of an HDF5 file, without converting it.

    Args:
        path: the ``.h5``/``.hdf5`` file.
        keys: dataset names (``"data,labels"`` or a list; nested ones as ``"group/data"``), or a
            mapping ``{"train/x": "x", "train/y": "y"}`` that also names them in the batch;
            ``None`` takes every dataset in the file. All must have the same first dimension.
        cache_bytes: decoded chunks of chunked datasets kept in memory, shared by the worker
            threads (and h5py's chunk cache per handle for datasets read through h5py). For
            ``shuffle="block"``, at least ``window x block_size`` rows' bytes lets each chunk be
            decoded about once per window.
        dense: read a covering slab instead of a point selection when the slab holds at most
            ``dense`` times as many rows as are needed.
        mmap: memory-map contiguous, unfiltered datasets and read gzip/shuffle/unfiltered
            chunked ones chunk by chunk from a map of the file (decoded here), instead of
            reading them through h5py.

    Batches are dicts ``key -> array`` (``names[key]`` when ``keys`` is a mapping); rows inside a batch come in storage order (which rows
    form a batch follows the loader's sampler). ``Loader(HDF5(...), batch_size=..., shuffle=...)``
    reads it in worker threads, each with its own handle.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        keys: str | list[str] | tuple[str, ...] | Mapping[str, str] | None = None,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        dense: float = 4.0,
        mmap: bool = True,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no HDF5 file at {self.path}")
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ConfigError(f"cache_bytes must be an integer >= 0, got {cache_bytes!r}", option="cache_bytes")
        if not isinstance(dense, (int, float)) or dense < 1:
            raise ConfigError(f"dense must be a number >= 1, got {dense!r}", option="dense")
        self.cache_bytes = cache_bytes
        self.dense = float(dense)
        with self._open() as f:
            self.infos, self._len = describe(f, self.path, parse_keys(keys))
        self.keys = tuple(info.key for info in self.infos)
        #: key -> name of its column in a batch (the key itself unless ``keys`` renames it)
        self.names = column_names(keys if isinstance(keys, Mapping) else None, self.keys, str(self.path), "keys")
        self._handles: PerThread[Any] = PerThread(self._open, _close)
        self.mmap = bool(mmap)
        self._maps: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._chunked: dict[str, ChunkedReader | None] = {}  # per process: readers hold a map of the file
        self._chunked_pid = 0
        self._file_map: _mmap.mmap | None = None
        self._cache: DecodedChunks | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_maps"], state["_lock"] = {}, None  # reopened on the other side; never pickle mapped data
        state["_chunked"], state["_chunked_pid"], state["_file_map"], state["_cache"] = {}, 0, None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _mapped(self, info: KeyInfo) -> np.ndarray | None:
        """The dataset as a read-only numpy memory map, when its layout allows it."""
        if not self.mmap or info.offset is None or info.file_dtype is None:
            return None
        arr = self._maps.get(info.key)
        if arr is None:
            with self._lock:
                arr = self._maps.get(info.key)
                if arr is None:
                    shape = (self._len, *info.shape)
                    arr = self._maps[info.key] = np.memmap(
                        self.path, dtype=info.file_dtype, mode="r", offset=info.offset, shape=shape
                    )
        return arr

    def _chunk_reader(self, info: KeyInfo) -> ChunkedReader | None:
        """This process's chunk-by-chunk reader of a chunked dataset, when its filters allow one."""
        if not self.mmap or not info.chunk_rows:
            return None
        if self._chunked_pid != os.getpid():  # first use here, or a forked child: nothing inherited is used
            self._lock = threading.Lock()
            self._chunked, self._file_map = {}, None
            self._cache = DecodedChunks(self.cache_bytes)
            self._chunked_pid = os.getpid()
        if info.key not in self._chunked:
            with self._lock:
                if info.key not in self._chunked:
                    ds = self._handles.get()[info.key]
                    reader = None
                    if chunk_layout(ds) is not None and self._cache is not None:
                        if self._file_map is None:
                            with open(self.path, "rb") as f:
                                self._file_map = _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
                        reader = chunked_reader(info.key, ds, self._file_map, self._cache)
                    self._chunked[info.key] = reader
        return self._chunked[info.key]

    def _open(self) -> Any:
        h5py = _h5py()
        try:
            return h5py.File(self.path, "r", rdcc_nbytes=self.cache_bytes)
        except OSError as exc:
            raise FileNotFoundError(f"cannot open {self.path} as HDF5 ({exc})") from exc

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        cols = ", ".join(f"{i.key}: {i.dtype}{list(i.shape)}" for i in self.infos)
        return f"HDF5({str(self.path)!r}, rows={self._len}, keys={{{cols}}})"

    @property
    def row_bytes(self) -> int:
        return sum(info.row_bytes for info in self.infos)

    def batch_bytes(self, batch_size: int) -> float:
        return float(batch_size * self.row_bytes)

    def read_rows(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Rows ``rows`` (sorted, unique) of every key: memory-mapped, or from this thread's h5py handle."""
        out: dict[str, np.ndarray] = {}
        if rows.size == 0:
            return {info.key: np.empty((0, *info.shape), info.dtype) for info in self.infos}
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        slab = (hi - lo) <= self.dense * rows.size
        contiguous = slab and (hi - lo) == rows.size
        for info in self.infos:
            mapped = self._mapped(info)
            if mapped is not None:
                got = np.array(mapped[lo:hi]) if contiguous else np.take(mapped, rows, axis=0)
                out[info.key] = got if got.dtype == info.dtype else got.astype(info.dtype)
                continue
            reader = self._chunk_reader(info)
            if reader is not None:
                out[info.key] = reader.rows(rows)
                continue
            ds = self._handles.get()[info.key]
            if contiguous:
                out[info.key] = ds[lo:hi]
            elif slab:
                out[info.key] = np.take(ds[lo:hi], rows - lo, axis=0)
            elif info.chunk_rows:  # HDF5's point selection across chunks is slower than a slab per chunk
                out[info.key] = _by_chunk(ds, rows, info.chunk_rows)
            else:
                out[info.key] = ds[rows]
        return out

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
        unique, where, bounds = gather_plan(chunk)
        check_rows(unique, self._len, repr(self))
        rows = self.read_rows(unique)
        if len(unique) != len(where) or np.any(where != np.arange(len(where))):
            rows = {k: np.take(v, where, axis=0) for k, v in rows.items()}
        names = self.names
        return [{names[k]: v[bounds[b] : bounds[b + 1]] for k, v in rows.items()} for b in range(len(chunk))]

    def close(self) -> None:
        """Close the handles and memory maps opened in this process (they reopen on the next read)."""
        self._handles.close()
        self._maps = {}  # unmapped once no batch still views them
        if self._chunked_pid == os.getpid():
            self._chunked = {}
            if self._cache is not None:
                self._cache.clear()
            if self._file_map is not None:
                try:
                    self._file_map.close()
                except BufferError:  # a read in flight; the map closes when it lets go
                    pass
                self._file_map = None


def _by_chunk(ds: Any, rows: np.ndarray, chunk_rows: int) -> np.ndarray:
    """Sorted ``rows`` of chunked h5py dataset ``ds``: one slab read per chunk touched."""
    out = np.empty((len(rows), *ds.shape[1:]), np.dtype(ds.dtype).newbyteorder("="))
    for _, a, b in chunk_groups(rows, chunk_rows):
        lo, hi = int(rows[a]), int(rows[b - 1]) + 1
        out[a:b] = ds[lo:hi][rows[a:b] - lo]
    return out
