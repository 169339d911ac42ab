"""HDF5 datasets into a store (``stoker.convert.hdf5``), slab by slab through ``slabs.write_slabs``.

How a dataset's slabs are read depends on its layout:

- **contiguous, no filters, native byte order** (h5py's default layout): not read at all. Its
  slabs are views of one read-only memory map of the file, which the shard writer copies
  straight from the page cache into the shard;
- **chunked, filters gzip / shuffle / none**: the stored chunks are taken from the same map
  and decoded on the writer threads (``sources/hdf5_chunks.py``), into reused slab buffers;
- **others** (byte-swapped, lzf, szip, blosc, no fill value, ...): h5py ``read_direct`` into
  reused slab buffers;
- **compound, string, variable-length or cast** datasets: each slab's rows taken as above
  (mapped or decoded when their stored bytes are rows: ``hdf5_types.fixed_layout``; decoded once
  per slab on the writer thread), else read whole through h5py, then cut into columns
  (``sources/hdf5_types.py``: one column per compound field, strings as ``String``/``Binary``,
  vlen arrays as ``Sequence``, native byte order).

Reused buffers come in ``writers + 1`` sets, used in turn (``write_slabs``' ``slot``).

Before anything is written: files other than the one named and declared sizes are checked as the
source checks them (``sources/hdf5_bounds.py``: ``allow_external``, ``allow_fill``), and a local
store's file system must have room for the rows' bytes (``shutil.disk_usage``; strings and
variable-length rows counted from a sample). ``report["source"]["files"]`` lists every file read
(not the manifest: it keeps only the file's name).

Whether the file is in the page cache when the conversion opens it (``sources/mapped_file.py``
decides: warm or cold) sets how the map is read:

- **cold**: a page-in thread reads each slab ``writers + 1`` slabs ahead of the writers
  (``posix_fadvise(WILLNEED)``, then ``madvise(MADV_POPULATE_READ)`` through ctypes, without
  the GIL), and a writer starts on a slab once it is in. Each slab is dropped from the page
  cache once written, and the store's pages reuse its memory;
- **warm**: the same page-in thread maps slabs ahead, but no writer waits for it on a slab
  whose pages are cached: a writer that catches up takes its own page faults.

Why it is built so (measurements, what was tried and dropped): ``docs/design-notes.md``.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import functools
import os
import shutil
import threading
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.convert.slabs import Slab, write_slabs
from stoker.errors import StoreWriteError
from stoker.sources.hdf5 import HDF5, KeyInfo, parse_keys
from stoker.sources.hdf5_bounds import PathLike, size_text
from stoker.sources.hdf5_chunks import ChunkedReader, DecodedChunks, chunk_layout, chunked_reader
from stoker.sources.hdf5_describe import read_error
from stoker.sources.hdf5_types import Field, parse_cast, values
from stoker.sources.mapped_file import MappedFile
from stoker.store.columns import Ragged
from stoker.store.format import Column
from stoker.store.urls import is_remote

_CACHED = 0.95  # a slab of a warm file with this share of its pages cached is not paged in


class _Slabs:
    """Slabs of an HDF5 file's datasets, for ``write_slabs``: :meth:`ahead`, :meth:`read`, :meth:`done`."""

    def __init__(self, source: HDF5) -> None:
        self.source = source
        self.handle = source._handles.get()  # noqa: SLF001 - the source's own per-thread handle
        self.mappable = {
            info.key: info
            for info in source.infos
            if info.offset is not None and (not info.plain or info.file_dtype == info.dtype)
        }  # plain ones are written straight from the map; others cut into columns from it
        decodable = [
            info.key
            for info in source.infos
            if info.chunk_rows
            and (info.plain or info.fixed)
            and not info.files
            and chunk_layout(self.handle[info.key]) is not None
        ]
        self.mapfile = MappedFile(source.path) if self.mappable or decodable else None
        self.mapped = (
            {key: self.mapfile.view(info, len(source)) for key, info in self.mappable.items()} if self.mapfile else {}
        )
        self.decoded: dict[str, ChunkedReader] = {}
        if self.mapfile is not None:
            for key in decodable:
                reader = chunked_reader(key, self.handle[key], self.mapfile.map, DecodedChunks(0))
                if reader is not None:
                    self.decoded[key] = reader
        self._buffers: dict[tuple[str, int], np.ndarray] = {}
        self._paging: dict[int, list[cf.Future[None]]] = {}
        self._paged: dict[int, list[tuple[int, int]]] = {}

    @property
    def cold(self) -> bool:
        return self.mapfile is not None and self.mapfile.cold

    def spans(self, start: int, stop: int) -> dict[str, tuple[int, int]]:
        """The bytes of the file holding rows ``start:stop`` of each mapped or decoded key, as (offset, size)."""
        out = {
            key: (int(info.offset or 0) + start * info.row_bytes, (stop - start) * info.row_bytes)
            for key, info in self.mappable.items()
        }
        for key, reader in self.decoded.items():
            per = reader.layout.chunks[0]
            span = reader.index.span(start // per, (stop - 1) // per)
            if span is not None:  # None: no chunk stored, every row is the fill value
                out[key] = span
        return {key: span for key, span in out.items() if span[1] > 0}

    def ahead(self, start: int, stop: int) -> None:
        """Start paging rows ``start:stop`` in; :meth:`read` waits for it unless they were cached (module docstring)."""
        if self.mapfile is None:
            return
        spans = list(self.spans(start, stop).values())
        cached = not self.cold and all(
            self.mapfile.resident(offset, size, sample=True) >= _CACHED for offset, size in spans
        )
        pages = [self.mapfile.ahead(offset, size) for offset, size in spans]
        if not cached:
            self._paging[start] = pages
        self._paged[start] = spans

    def done(self, start: int, stop: int) -> None:
        if self.mapfile is not None:
            for offset, size in self._paged.pop(start, ()):
                self.mapfile.release(offset, size)  # dropped from the page cache if the conversion brought it in

    def read(self, start: int, stop: int, slot: int) -> Slab:
        # A writer starts on a slab once it is in memory: faults on a cold map would read the
        # file in small pieces, out of order with the page-in thread's large sequential reads.
        for future in self._paging.pop(start, ()):
            future.result()
        rows = stop - start
        out: Slab = {}
        for info in self.source.infos:
            key = info.key
            if not info.plain:  # compound, strings, vlen, cast: rows cut into columns
                out.update(self._columns(info, start, stop))
                continue
            name = self.source.names[key]
            if key in self.mapped:
                out[name] = self.mapped[key][start:stop]
                continue
            view = self._buffer(info, slot, rows)
            if key in self.decoded:
                out[name] = functools.partial(
                    self.decoded[key].rows, np.arange(start, stop), view
                )  # decoded on the writer thread
                continue
            try:
                self.handle[key].read_direct(view, np.s_[start:stop], np.s_[0:rows])
            except (OSError, RuntimeError) as exc:
                raise read_error(self.source.path, key, start, stop, exc) from exc
            out[name] = view
        return out

    def _columns(self, info: KeyInfo, start: int, stop: int) -> Slab:
        """Rows ``start:stop`` of a dataset that is not plain, cut into its columns: from the map,
        decoded on the writer thread (once for all its columns), or read through h5py."""
        key, names = info.key, self.source.names
        where = f"{self.source.path}: dataset {key!r}"
        if key in self.decoded:
            rows = _Once(functools.partial(self.decoded[key].rows, np.arange(start, stop)))
            return {names[f.name]: functools.partial(_field, f, rows, where, start) for f in info.fields}
        if key in self.mapped:
            raw = self.mapped[key][start:stop]
        else:
            try:
                raw = self.handle[key][start:stop]
            except (OSError, RuntimeError) as exc:  # a corrupt chunk, a failed filter
                raise read_error(self.source.path, key, start, stop, exc) from exc
        return {names[f.name]: values(f, raw, where, start) for f in info.fields}

    def _buffer(self, info: KeyInfo, slot: int, rows: int) -> np.ndarray:
        buf = self._buffers.get((info.key, slot))
        if buf is None or len(buf) < rows:
            buf = self._buffers[(info.key, slot)] = np.empty((rows, *info.shape), dtype=info.dtype)
        return buf[:rows]

    def close(self) -> None:
        self.mapped.clear()  # unmap the file: the kernel keeps mapped pages cached whatever it is told
        self.decoded.clear()
        if self.mapfile is not None:
            self.mapfile.close()
        self.source.close()


class _Once:
    """``fn()``'s result, computed on the first call (the writer thread) and kept for the others."""

    def __init__(self, fn: Callable[[], np.ndarray]) -> None:
        self._fn: Callable[[], np.ndarray] | None = fn
        self._value: np.ndarray | None = None
        self._lock = threading.Lock()

    def __call__(self) -> np.ndarray:
        with self._lock:
            if self._fn is not None:
                self._value, self._fn = self._fn(), None
            return typing.cast(np.ndarray, self._value)


def _field(field: Field, rows: _Once, where: str, start: int) -> Any:
    return values(field, rows(), where, start)


SAMPLE_ROWS = 256  # rows read to size the variable-length columns


def _sized(
    options: ConvertOptions, source: HDF5, handle: Any, schema: Mapping[str, Column]
) -> tuple[ConvertOptions, float]:
    """``options`` with ``shard_size`` scaled so that slabs of strings and vlen rows hold about that many bytes,
    and the bytes of a row.

    ``write_slabs`` sizes slabs from the schema, which counts a string or sequence row as one
    value; rows of many values would make slabs (and shards) many times ``shard_size``. The
    first :data:`SAMPLE_ROWS` rows of such columns say how large their rows are.
    """
    declared = sum(col.row_size * col.numpy_dtype.itemsize for col in schema.values())
    actual = float(declared)
    for info in source.infos:
        varying = [f for f in info.fields if f.kind != "tensor"]
        if not varying:
            continue
        where = f"{source.path}: dataset {info.key!r}"
        raw = handle[info.key][0 : min(len(source), SAMPLE_ROWS)]
        for field in varying:
            got = values(field, raw, where)
            sampled = got.values.nbytes if isinstance(got, Ragged) else sum(len(v) for v in got)
            col = schema[source.names[field.name]]
            actual += sampled / max(len(raw), 1) - col.row_size * col.numpy_dtype.itemsize
    if actual <= declared:
        return options, actual
    return dataclasses.replace(options, shard_size=max(1, int(int(options.shard_size) * declared / actual))), actual


def _check_space(store: str | os.PathLike[str], needed: float, file: str | os.PathLike[str]) -> None:
    """A StoreWriteError when the file system of a local ``store`` has less than ``needed`` bytes free."""
    if is_remote(store):
        return
    where = Path(os.path.abspath(store))
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    if needed > free:
        raise StoreWriteError(
            f"converting {file} needs about {size_text(int(needed))} for {store}, but {where} has "
            f"{size_text(free)} free; free space there or write the store elsewhere",
            path=Path(store),
            errno=28,
        )


def convert(
    file: str | os.PathLike[str],
    store: str | os.PathLike[str],
    keys: str | Sequence[str] | Mapping[str, str] | None,
    options: ConvertOptions,
    cast: Mapping[str, Any] | None = None,
    allow_external: PathLike | Sequence[PathLike] | None = None,
    allow_fill: bool = False,
) -> ConvertResult:
    """Convert datasets ``keys`` of an HDF5 file into a store, one shard-sized slab at a time.

    Every numeric dtype and per-row shape is kept (column name = key, or ``keys[key]`` when ``keys``
    is a mapping ``{"train/x": "x"}``); compound datasets give a column per field (``table.col``),
    strings ``String``/``Binary`` columns, vlen arrays ``Sequence`` ones, as ``sources.HDF5``
    reads them; ``cast`` as there. A missing key, keys of different lengths, and types with no
    column representation raise SchemaError naming the file, dataset and field.
    ``options.workers``: shards written at once (default: one per core, at most 4).
    ``allow_external``, ``allow_fill``: as ``sources.HDF5``'s. A local store's file system must
    have room for the rows (else StoreWriteError, before anything is written).
    """
    chosen = keys if keys is None or isinstance(keys, (str, Mapping)) else parse_keys(tuple(keys))
    source = HDF5(file, chosen, cast=cast, allow_external=allow_external, allow_fill=allow_fill)
    try:
        slabs = _Slabs(source)
    except BaseException:
        source.close()
        raise
    schema = {source.names[field.name]: field.column() for field in source.fields}
    chunk_rows = max((info.chunk_rows for info in source.infos), default=0)
    described: dict[str, object] = {"kind": "hdf5", "file": os.path.basename(str(file)), "keys": list(source.keys)}
    if any(key != name for key, name in source.names.items()):
        described["names"] = dict(source.names)
    if cast:
        described["cast"] = parse_cast(cast)
    rows = len(source)
    try:
        sized, row_bytes = _sized(options, source, slabs.handle, schema)
        _check_space(store, rows * row_bytes, file)
        write_slabs(
            store,
            slabs.read,
            schema,
            rows,
            sized,
            metadata={"source": described},
            desc=f"hdf5 {Path(file).name}",
            align=max(chunk_rows, 1),
            ahead=slabs.ahead,
            done=slabs.done,
            cold=slabs.cold,
        )
    finally:
        slabs.close()
    return ConvertResult(Path(store), rows, report={"source": {**described, "files": list(source.files)}})
