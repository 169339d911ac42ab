"""HDF5 files and arrays into a store, slab by slab (never the whole input in RAM).

Both inputs are fixed-width columns that can be read by row range, so one routine writes
them: rows are read in slabs of exactly one shard, and each slab is written as one shard (no
re-concatenation) by a pool of writer threads, ``writers`` shards at a time (default: one
per core, at most 4). One thread's ``write()`` into the page cache runs at about one core's
speed, slower than a warm read, so shards written side by side are what lets a conversion
approach the read rate. Memory in use: about ``writers + 1`` slabs.

HDF5 datasets stored contiguously without filters, in native byte order (h5py's default
layout), are not read at all: their slabs are views of one read-only memory map of the
file, which the shard writer copies straight from the page cache into the shard (one copy
instead of two). A page-in thread brings each slab in ahead of the writer: it asks the
kernel to read it (``posix_fadvise(WILLNEED)``), then maps it into the process 16 MB at a
time (``madvise(MADV_POPULATE_READ)``, Linux >= 5.14; without it the writer takes the page
faults), so a cold file streams from disk while the writer threads only hash and write; a
cold file's pages are given back once each slab is written (``mapped_file.py``).
Other datasets (chunked, compressed, byte-swapped) are read with ``read_direct`` into
``writers + 1`` reused slab buffers, while the writer threads write earlier slabs.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import os
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.threads import default_workers
from stoker.sources._common import progress_bar, rows_per_step
from stoker.sources.arrays import as_columns
from stoker.sources.hdf5 import HDF5, parse_keys
from stoker.sources.hdf5_chunks import ChunkedReader, DecodedChunks, chunk_layout, chunked_reader
from stoker.sources.mapped_file import MappedFile
from stoker.store.format import Column, Tensor
from stoker.store.shardfile import ShardTask
from stoker.store.writer import DEFAULT_SHARD_SIZE, StoreWriter, parse_size

Slab = dict[str, "np.ndarray | Callable[[], np.ndarray]"]
ReadSlab = Callable[[int, int, int], Slab]
MAX_WRITERS = 4  # one page-cache write() runs at about one core's speed; past a few, memory bandwidth decides
MIN_PIPELINED_SHARD = 32 * 2**20


def default_writers() -> int:
    """Shards written at once: one per usable core, at most :data:`MAX_WRITERS`."""
    return default_workers(MAX_WRITERS)


def write_slabs(
    store: str | os.PathLike[str],
    read: ReadSlab,
    schema: dict[str, Column],
    rows: int,
    *,
    shard_size: int | str,
    overwrite: bool,
    progress: bool | None,
    metadata: Mapping[str, Any] | None,
    desc: str,
    align: int = 1,
    writers: int | None = None,
    ahead: Callable[[int, int], None] | None = None,
    done: Callable[[int, int], None] | None = None,
    cold: bool = False,
) -> Path:
    """Write ``rows`` rows into ``store``, one shard per slab, ``writers`` shards at a time.

    ``read(start, stop, slot) -> {column: array}`` returns rows ``start:stop``; it runs on this
    thread, in order, while earlier slabs are written. ``slot`` (0 .. writers) names the buffer
    set a reader that reuses buffers may fill: the slab read into a slot last time is written
    and let go by then. A value may be a zero-argument callable instead of an array: it runs
    on the writer thread (work that releases the GIL, such as decoding, then runs in parallel).
    ``ahead(start, stop)``, if given, is told of each slab ``writers + 1`` slabs before it is
    read (to start reading it from disk), and ``done(start, stop)`` once its shard is written.
    ``cold``: the input comes from disk (not the page cache), which sizes slabs (see below).
    """
    if rows <= 0:
        raise EmptyDatasetError(f"{desc} has no rows; there is nothing to convert")
    writers = default_writers() if writers is None else int(writers)
    if writers < 1:
        raise ConfigError(f"writers must be at least 1, got {writers}", option="writers")
    row_bytes = sum(col.row_size * col.numpy_dtype.itemsize for col in schema.values())
    # Shards of at most shard_size; a small input is cut finer (not under MIN_PIPELINED_SHARD) so
    # that reading overlaps writing from start to end: into 2 * (writers + 1) slabs, or 8 * (...)
    # for an input read from disk, whose pages, given back slab by slab, are then reused for the
    # store's (measured: finer slabs help a cold file, and cost a warm one).
    limit = parse_size(shard_size)
    target = min(limit, max(rows * row_bytes // ((8 if cold else 2) * (writers + 1)), MIN_PIPELINED_SHARD))
    step = rows_per_step(row_bytes, target)
    if align > 1 and step > align:
        step -= step % align  # whole HDF5 chunks per read
    slabs = [(start, min(start + step, rows)) for start in range(0, rows, step)]
    depth = writers + 1  # slabs asked for ahead of the one being read: one per writer, and the next
    if ahead is not None:
        for start, stop in slabs[:depth]:
            ahead(start, stop)
    with StoreWriter(store, schema, shard_size=step * row_bytes, overwrite=overwrite, metadata=metadata) as writer:
        bar = progress_bar(rows, desc, progress)
        inflight: deque[cf.Future[ShardTask]] = deque()
        written = deque(slabs)  # the slab of each shard in flight, oldest first

        def commit_oldest() -> None:
            task = inflight.popleft().result()
            writer.commit_shard(task)
            start, stop = written.popleft()
            if done is not None:
                done(start, stop)
            bar.update(task.info.rows if task.info else 0)

        # Leaving this block waits for every write in flight, so the writer never closes or
        # aborts under one. On an error, writes not yet started are cancelled.
        with cf.ThreadPoolExecutor(max_workers=writers, thread_name_prefix="stoker-convert-write") as pool, bar:
            try:
                for k, (start, stop) in enumerate(slabs):
                    if ahead is not None and k + depth < len(slabs):
                        ahead(*slabs[k + depth])
                    slab = read(start, stop, k % (writers + 1))
                    while len(inflight) >= writers:
                        commit_oldest()
                    inflight.append(pool.submit(_write_shard, writer.reserve_shard(), slab, start))
                while inflight:
                    commit_oldest()
            except BaseException:
                for future in inflight:
                    future.cancel()
                raise
    return Path(store)


def _write_shard(task: ShardTask, slab: Slab, start: int) -> ShardTask:
    return task.write({k: v() if callable(v) else v for k, v in slab.items()}, start)


def hdf5_to_store(
    file: str | os.PathLike[str],
    store: str | os.PathLike[str],
    keys: str | list[str] | tuple[str, ...] | None = None,
    *,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    overwrite: bool = False,
    progress: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    writers: int | None = None,
) -> Path:
    """Convert datasets ``keys`` of an HDF5 file into a store, one shard-sized slab at a time.

    Every numeric dtype and per-row shape is kept (column name = key). A missing key, keys of
    different lengths, and object / variable-length / string datasets raise SchemaError.
    ``writers``: shards written at once (default: one per core, at most 4). ``shard_size`` is
    an upper bound: a small input is cut into ``2 * (writers + 1)`` shards, or ``8 * (writers + 1)``
    when the file is not in the page cache (none under 32 MB), so that reading and writing overlap.
    """
    source = HDF5(file, parse_keys(keys))
    schema = {info.key: Tensor(info.dtype, info.shape) for info in source.infos}
    chunk_rows = max((info.chunk_rows for info in source.infos), default=0)

    # Memory-mapped keys (see the module docstring), paged in ``writers + 1`` slabs ahead; chunked
    # gzip/shuffle keys decoded from the same map on the writer threads (their compressed bytes
    # paged in ahead too); other keys read through h5py. Decoded and h5py keys go into
    # ``writers + 1`` slab buffers per key, used in turn (write_slabs' ``slot``).
    mappable = [info for info in source.infos if info.offset is not None and info.file_dtype == info.dtype]
    handle = source._handles.get()  # noqa: SLF001 - the source's own per-thread handle
    decodable = [info.key for info in source.infos if info.chunk_rows and chunk_layout(handle[info.key]) is not None]
    mapfile = MappedFile(source.path) if mappable or decodable else None
    mapped = {info.key: mapfile.view(info, len(source)) for info in mappable} if mapfile else {}
    decoded: dict[str, ChunkedReader] = {}
    for key in decodable:
        reader = chunked_reader(key, handle[key], mapfile.map, DecodedChunks(0)) if mapfile else None
        if reader is not None:
            decoded[key] = reader
    buffers: dict[tuple[str, int], np.ndarray] = {}
    paging: dict[int, list[cf.Future[None]]] = {}
    paged: dict[int, list[tuple[int, int]]] = {}

    def ahead(start: int, stop: int) -> None:
        if mapfile is None:
            return
        spans = [(int(info.offset or 0) + start * info.row_bytes, (stop - start) * info.row_bytes) for info in mappable]
        for reader in decoded.values():
            per = reader.layout.chunks[0]
            span = reader.index.span(start // per, (stop - 1) // per)
            if span is not None:
                spans.append(span)
        paging[start] = [mapfile.ahead(offset, size) for offset, size in spans]
        paged[start] = spans

    def done(start: int, stop: int) -> None:
        if mapfile is not None:
            for offset, size in paged.pop(start, ()):
                mapfile.release(offset, size)  # dropped from the page cache if the conversion brought it in

    def read(start: int, stop: int, slot: int) -> Slab:
        # A writer starts on a slab once it is in memory: faults on a cold map would read the
        # file in small pieces, out of order with the page-in thread's large sequential reads.
        for future in paging.pop(start, ()):
            future.result()
        out: Slab = {}
        for info in source.infos:
            if info.key in mapped:
                out[info.key] = mapped[info.key][start:stop]
                continue
            buf = buffers.get((info.key, slot))
            if buf is None or len(buf) < stop - start:
                buf = buffers[(info.key, slot)] = np.empty((stop - start, *info.shape), dtype=info.dtype)
            view = buf[: stop - start]
            if info.key in decoded:
                out[info.key] = functools.partial(decoded[info.key].rows, np.arange(start, stop), view)
                continue
            handle[info.key].read_direct(view, np.s_[start:stop], np.s_[0 : stop - start])
            out[info.key] = view
        return out

    meta = {"source": {"kind": "hdf5", "file": os.path.basename(str(file)), "keys": list(source.keys)}, **dict(metadata or {})}
    try:
        return write_slabs(
            store, read, schema, len(source), shard_size=shard_size, overwrite=overwrite, progress=progress,
            metadata=meta, desc=f"hdf5 {Path(file).name}", align=max(chunk_rows, 1), writers=writers, ahead=ahead, done=done,
            cold=mapfile is not None and mapfile.cold,
        )  # fmt: skip
    finally:
        mapped.clear()  # unmap the file: the kernel keeps mapped pages cached whatever it is told
        decoded.clear()
        if mapfile is not None:
            mapfile.close()
        source.close()


def arrays_to_store(
    arrays: Any,
    store: str | os.PathLike[str],
    *,
    names: list[str] | tuple[str, ...] | None = None,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    overwrite: bool = False,
    progress: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    writers: int | None = None,
) -> Path:
    """Write arrays into a store, one shard-sized slab at a time.

    ``arrays``: a dict name -> array/tensor/``.npy`` path, a sequence of them (named by
    ``names``, else ``"0"``, ``"1"``, ...), a TensorDataset, or an ``.npz`` path.
    Memory-mapped inputs are read slab by slab, so they may be larger than RAM.
    ``writers`` and ``shard_size``: as for :func:`hdf5_to_store`.
    """
    if isinstance(arrays, (list, tuple)):
        columns, _ = as_columns(tuple(arrays), {})
    else:
        columns, _ = as_columns((arrays,), {})
    if names is not None:
        names = [str(n) for n in names]
        if len(names) != len(columns) or len(set(names)) != len(names):
            raise ConfigError(f"names {names} must give {len(columns)} distinct column names, one per array", option="names")
        columns = dict(zip(names, columns.values()))
    schema = {k: Tensor(v.dtype, v.shape[1:]) for k, v in columns.items()}

    def read(start: int, stop: int, slot: int) -> dict[str, np.ndarray]:
        return {k: np.ascontiguousarray(v[start:stop]) for k, v in columns.items()}

    meta = {"source": {"kind": "arrays", "columns": list(columns)}, **dict(metadata or {})}
    rows = len(next(iter(columns.values())))
    return write_slabs(
        store, read, schema, rows, shard_size=shard_size, overwrite=overwrite, progress=progress, metadata=meta, desc="arrays", writers=writers,
    )  # fmt: skip

