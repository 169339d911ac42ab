"""``HDF5(path, keys)``: datasets of an HDF5 file as a batch source, read without converting it.

Each worker thread (and process, after a fork) opens its own read-only h5py handle on first use;
a chunk of batches is read with one increasing selection per key. Rows of fixed-size types
(``hdf5_types.fixed_layout``) skip h5py where the layout allows: a contiguous, unfiltered dataset
is memory-mapped and gathered with ``np.take``; a chunked one with gzip and/or shuffle (or no)
filters is decoded chunk by chunk here (``hdf5_chunks.py``). Everything else (other filters,
external storage, no fill value; variable-length, space-padded string and cast datasets; every
dataset with ``mmap=False``) goes through h5py: a covering slab when the rows lie close together,
else a slab per chunk or a point selection. The rows are then cut into columns (``hdf5_types.py``).
Keys, filters, other files and unwritten rows are checked at open (``hdf5_describe.py``,
``hdf5_bounds.py``).
"""

from __future__ import annotations

import itertools
import json
import mmap as _mmap
import os
import threading
from collections.abc import Mapping, Sequence
from operator import methodcaller
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, InputError, StoreNotFoundError
from stoker.pipeline.columns import check_rows, gather_plan
from stoker.pipeline.padding import pad_groups
from stoker.pipeline.ranks import digest, row_runs, value_parts
from stoker.pipeline.source import BatchSource
from stoker.sources._common import PerThread
from stoker.sources.hdf5_bounds import Bounds
from stoker.sources.hdf5_chunks import ChunkedReader, DecodedChunks, chunk_groups, chunk_layout, chunked_reader
from stoker.sources.hdf5_describe import KeyInfo, describe, h5py_module, parse_keys, read_error
from stoker.sources.hdf5_types import parse_cast, values
from stoker.store.columns import Ragged

DEFAULT_CACHE_BYTES = 256 * 2**20

__all__ = ["DEFAULT_CACHE_BYTES", "HDF5", "KeyInfo", "parse_keys"]


class HDF5(BatchSource):
    """Batches straight from datasets of an HDF5 file, without converting it.

    Args:
        path: the ``.h5``/``.hdf5`` file.
        keys: dataset names (``"data,labels"`` or a list; nested ones as ``"group/data"``), or a
            mapping ``{"train/x": "x", "train/y": "y"}`` that also names them in the batch;
            ``None`` takes every dataset in the file. All must have the same first dimension.
            A compound dataset gives one column per field, ``"table.col1"``; ``"table"`` takes
            them all, ``"table.col1,table.col3"`` some (a mapping ``{"table": "t"}`` renames
            the prefix: ``"t.col1"``). Column kinds: ``hdf5_types.py``.
        cast: ``{column: dtype}`` reads a column as another dtype: ``"float64"`` for a long
            double dataset (torch has no tensor for it), ``"str"`` / ``"bytes"`` for strings.
        pad_value: what pads variable-length (``sequence``) columns in a batch.
        pad_to_multiple_of: such columns are padded to a multiple of this length.
        cache_bytes: decoded chunks of chunked datasets kept in memory, shared by the worker
            threads (and h5py's chunk cache per handle for datasets read through h5py). For
            ``shuffle="block"``, at least ``window x block_size`` rows' bytes lets each chunk be
            decoded about once per window.
        dense: read a covering slab instead of a point selection when the slab holds at most
            ``dense`` times as many rows as are needed.
        mmap: memory-map contiguous, unfiltered datasets and read gzip/shuffle/unfiltered
            chunked ones chunk by chunk from a map of the file (decoded here), instead of
            reading them through h5py.
        allow_external: directories (one, or a list) from which files other than ``path`` may be
            read: targets of external links, external storage, virtual datasets' sources. By
            default none is (a ConfigError names the dataset and the file). ``files`` lists every
            file read.
        allow_fill: read a dataset whose rows were mostly never written (over 64 MiB of fill
            value) instead of refusing it.

    Batches are dicts ``column -> value`` (``names[column]`` when ``keys`` is a mapping): an
    array per numeric column, a list of ``str``/``bytes`` per string or binary column, and per
    variable-length column ``x`` the rows padded to the batch's longest (``x``) and
    ``x_lengths``, as from a store. Rows inside a batch come in storage order (which rows
    form a batch follows the loader's sampler).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        keys: str | list[str] | tuple[str, ...] | Mapping[str, str] | None = None,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        dense: float = 4.0,
        mmap: bool = True,
        cast: Mapping[str, Any] | None = None,
        pad_value: int | float = 0,
        pad_to_multiple_of: int = 1,
        allow_external: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        allow_fill: bool = False,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            what = "is a directory" if self.path.is_dir() else "does not exist"
            raise StoreNotFoundError(f"no HDF5 file at {self.path}: the path {what}", path=self.path)
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ConfigError(f"cache_bytes must be an integer >= 0, got {cache_bytes!r}", option="cache_bytes")
        if not isinstance(dense, (int, float)) or dense < 1:
            raise ConfigError(f"dense must be a number >= 1, got {dense!r}", option="dense")
        self.cache_bytes = cache_bytes
        self.dense = float(dense)
        if isinstance(pad_to_multiple_of, bool) or not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1:
            raise ConfigError(
                f"pad_to_multiple_of must be an integer >= 1, got {pad_to_multiple_of!r}", option="pad_to_multiple_of"
            )
        if isinstance(keys, Mapping) and any(not isinstance(v, str) or not v for v in keys.values()):
            raise ConfigError(f"keys={dict(keys)!r} must rename each key to a non-empty string", option="keys")
        self.pad_value = pad_value
        self.pad_to_multiple_of = pad_to_multiple_of
        bounds = Bounds.of(self.path, allow_external, allow_fill)
        with self._open() as f:
            self.infos, self._len, selected_by = describe(f, bounds, parse_keys(keys), parse_cast(cast))
        self.keys = tuple(info.key for info in self.infos)  # the datasets read
        #: every file reading these keys reads: ``path``, then the others (``allow_external``)
        self.files = tuple(dict.fromkeys([os.path.abspath(self.path), *(f for info in self.infos for f in info.files)]))
        self.fields = tuple(fl for info in self.infos for fl in info.fields)
        #: column -> its name in a batch (the column itself unless ``keys`` is a mapping that renames it)
        self.names = {c: _renamed(c, s, keys) for c, s in selected_by.items()}
        _check_names(self)
        self._handles: PerThread[Any] = PerThread(self._open, methodcaller("close"))
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
        if not self.mmap or not info.chunk_rows or info.files:
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
        h5py = h5py_module()
        try:
            return h5py.File(self.path, "r", rdcc_nbytes=self.cache_bytes)
        except OSError as exc:
            raise InputError(
                f"cannot open {self.path} as HDF5 ({exc}); is it an HDF5 file, and complete (not truncated)?",
                path=self.path,
            ) from exc

    def __len__(self) -> int:
        return self._len

    def report(self) -> dict[str, list[str]]:
        """``{"files": [...]}``: every file these keys read (the one named first)."""
        return {"files": list(self.files)}

    def __repr__(self) -> str:
        cols = ", ".join(f"{i.key}: {i.dtype}{list(i.shape)}" for i in self.infos)
        return f"HDF5({str(self.path)!r}, rows={self._len}, keys={{{cols}}})"

    def content_fingerprint(self) -> str:
        """What the ranks compare (``pipeline/ranks.py``): rows, each dataset's key, dtype and row shape,
        and the values of the rows ``row_runs`` picks, read as batches read them: every row up to
        256 MiB, else 64 MiB in evenly spaced runs of whole chunks, and then each file's size too.
        The names of files other than ``path`` count (they resolve links); ``path``'s does not, so
        copies at other paths agree."""
        runs = row_runs(self._len, self.row_bytes, max(info.chunk_rows or 1 for info in self.infos))
        whole = sum(b - a for a, b in runs) == self._len
        sizes = [] if whole else [os.path.getsize(f) for f in self.files]
        said = json.dumps([self._len, [(i.key, str(i.dtype), list(i.shape)) for i in self.infos], sizes, runs])
        names = [os.path.basename(f) for f in self.files[1:]]
        read = (value_parts(self.read_rows(np.arange(a, b, dtype=np.int64))) for a, b in runs)
        return "hdf5:" + digest(itertools.chain([said, *names], *read))

    @property
    def row_bytes(self) -> int:
        return sum(info.row_bytes for info in self.infos)

    def batch_bytes(self, batch_size: int) -> float:
        return float(batch_size * self.row_bytes)

    def read_rows(self, rows: np.ndarray) -> dict[str, Any]:
        """Rows ``rows`` (sorted, unique) of every column: memory-mapped, or from this thread's h5py handle.

        Numeric columns come as native-order arrays, variable-length ones as ``Ragged``, string
        and binary ones as lists.
        """
        out: dict[str, Any] = {}
        lo, hi = (int(rows[0]), int(rows[-1]) + 1) if rows.size else (0, 0)
        slab = (hi - lo) <= self.dense * rows.size
        contiguous = slab and (hi - lo) == rows.size
        for info in self.infos:
            raw = None
            if info.fixed and rows.size:  # stored bytes are rows: a memory map, or chunks decoded here
                mapped = self._mapped(info)
                if mapped is not None:
                    raw = np.array(mapped[lo:hi]) if contiguous else np.take(mapped, rows, axis=0)
                else:
                    reader = self._chunk_reader(info)
                    if reader is not None:
                        raw = reader.rows(rows)
            if raw is None:
                raw = self._through_h5py(info, rows, slab, contiguous)
            where = f"{self.path}: dataset {info.key!r}"
            for field in info.fields:
                out[field.name] = values(field, raw, where, lo)  # native order, cast, fields picked
        return out

    def _through_h5py(self, info: KeyInfo, rows: np.ndarray, slab: bool, contiguous: bool) -> np.ndarray:
        """Rows ``rows`` of ``info``'s dataset as h5py reads them (stored dtype, compound whole)."""
        ds = self._handles.get()[info.key]
        if not rows.size:
            return ds[0:0]
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        try:
            if contiguous:
                return ds[lo:hi]
            if slab:
                return np.take(ds[lo:hi], rows - lo, axis=0)
            if info.chunk_rows:  # HDF5's point selection across chunks is slower than a slab per chunk
                return _by_chunk(ds, rows, info.chunk_rows)
            return ds[rows]
        except (OSError, RuntimeError) as exc:  # h5py's errors of a corrupt chunk or a failed filter
            raise read_error(self.path, info.key, lo, hi, exc) from exc

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, Any]]:
        unique, where, bounds = gather_plan(chunk)
        check_rows(unique, self._len, repr(self))
        rows = self.read_rows(unique)
        if len(unique) != len(where) or np.any(where != np.arange(len(where))):
            rows = {k: _take(v, where) for k, v in rows.items()}
        batches: list[dict[str, Any]] = [{} for _ in chunk]
        for column, value in rows.items():
            name = self.names[column]
            if isinstance(value, Ragged):  # padded per batch, as the store's sequence columns are
                padded = pad_groups(value, bounds, self.pad_value, self.pad_to_multiple_of)
                lengths = value.lengths
                for k, batch in enumerate(batches):
                    batch[name], batch[f"{name}_lengths"] = padded[k], lengths[bounds[k] : bounds[k + 1]]
            else:
                for k, batch in enumerate(batches):
                    batch[name] = value[bounds[k] : bounds[k + 1]]
        return batches

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
    """Sorted ``rows`` of chunked h5py dataset ``ds``: one slab read per chunk touched (stored dtype)."""
    parts = []
    for _, a, b in chunk_groups(rows, chunk_rows):
        lo, hi = int(rows[a]), int(rows[b - 1]) + 1
        parts.append(ds[lo:hi][rows[a:b] - lo])
    return np.concatenate(parts)


def _take(value: Any, where: np.ndarray) -> Any:
    """Rows ``where`` of a column's values (array, ``Ragged`` or list)."""
    if isinstance(value, Ragged):
        starts, lengths = value.offsets[:-1][where], value.lengths[where]
        offsets = np.zeros(len(where) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        positions = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        return Ragged(value.values[positions], offsets)
    if isinstance(value, list):
        return [value[i] for i in where.tolist()]
    return np.take(value, where, axis=0)


def _renamed(column: str, selected_by: str, keys: Any) -> str:
    """The batch name of ``column``: a mapping ``{key: name}`` renames the key's part of it."""
    if not isinstance(keys, Mapping):
        return column
    return str(keys[selected_by]) + column[len(selected_by) :]


def _check_names(source: HDF5) -> None:
    """A ConfigError when two columns (or a sequence column's ``<name>_lengths``) get one batch key."""
    seen: dict[str, str] = {}
    for field in source.fields:
        name = source.names[field.name]
        for out in (name, f"{name}_lengths")[: 1 + (field.kind == "sequence")]:
            if out in seen:
                raise ConfigError(
                    f"{source.path}: keys gives two columns the name {out!r} ({seen[out]!r} and {field.name!r}); "
                    "rename one with keys={key: name}",
                    option="keys",
                )
            seen[out] = field.name
