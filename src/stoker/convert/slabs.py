"""Fixed-width columns into a store, slab by slab (never the whole input in RAM).

:func:`write_slabs` is the routine every row-range input shares (HDF5 files: ``from_hdf5.py``;
arrays: ``from_arrays.py``): rows are read in slabs of exactly one shard, and each slab is
written as one shard (no re-concatenation) by a pool of writer threads, ``writers`` shards at a
time (default: one per core, at most 4). Shards written side by side let a conversion approach
the read rate (a single thread's ``write()`` into the page cache is the bottleneck otherwise).
Memory in use: about ``writers + 1`` slabs.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stoker.convert.options import ConvertOptions
from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.schedule import usable_cores
from stoker.store.format import Column
from stoker.store.shardfile import ShardTask

Slab = dict[str, "np.ndarray | Callable[[], np.ndarray]"]
ReadSlab = Callable[[int, int, int], Slab]
MAX_WRITERS = 4  # one page-cache write() runs at about one core's speed; past a few, memory bandwidth decides
MIN_PIPELINED_SHARD = 32 * 2**20


def default_writers() -> int:
    """Shards written at once: one per usable core, at most :data:`MAX_WRITERS`."""
    return min(usable_cores(), MAX_WRITERS)


def write_slabs(
    store: str | os.PathLike[str],
    read: ReadSlab,
    schema: dict[str, Column],
    rows: int,
    options: ConvertOptions,
    *,
    metadata: Mapping[str, Any],
    desc: str,
    align: int = 1,
    ahead: Callable[[int, int], None] | None = None,
    done: Callable[[int, int], None] | None = None,
    cold: bool = False,
) -> Path:
    """Write ``rows`` rows into ``store``, one shard per slab, ``options.workers`` shards at a time.

    ``options.shard_size`` is an upper bound: a small input is cut into about ``2 * (writers + 1)``
    shards, or ``8 * (writers + 1)`` when ``cold`` (none under 32 MB, so an input under 32 MB is one
    shard; a count above one is rounded up to a multiple of the writers), so that reading and
    writing overlap and the writers finish together.
    ``metadata`` (what the conversion records about its input) is updated with ``options.metadata``.

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
    writers = default_writers() if options.workers is None else options.workers
    if writers < 1:
        raise ConfigError(f"workers must be at least 1 (shards written at once), got {writers}", option="workers")
    row_bytes = sum(col.row_size * col.numpy_dtype.itemsize for col in schema.values())
    # a cold input's pages, given back slab by slab, are reused for the store's: finer slabs help it
    limit = int(options.shard_size)
    target = min(limit, max(rows * row_bytes // ((8 if cold else 2) * (writers + 1)), MIN_PIPELINED_SHARD))
    slabs = even_slabs(rows, max(1, target // max(row_bytes, 1)), align, multiple=writers)
    step = max(stop - start for start, stop in slabs)
    depth = writers + 1  # slabs asked for ahead of the one being read: one per writer, and the next
    if ahead is not None:
        for start, stop in slabs[:depth]:
            ahead(start, stop)
    with options.writer(store, schema, metadata, shard_size=step * row_bytes) as writer:
        bar = options.bar(rows, desc)
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


def even_slabs(rows: int, step: int, align: int = 1, multiple: int = 1) -> list[tuple[int, int]]:
    """Rows ``0:rows`` cut into as few slabs of at most ``step`` rows as can be, all of about one size.

    Sizes differ by at most one row, or by one ``align``-row unit (whole HDF5 chunks per read)
    when ``step`` spans several units: no short last slab left for one writer alone. When the
    rows need several slabs anyway, the count is rounded up to a ``multiple`` (the writers),
    where there are rows enough, so that the writers finish together; rows that fit in one slab
    stay one slab (one shard), however many writers there are.
    """
    unit = align if 1 < align < step else 1
    units = -(-rows // unit)
    count = -(-units // max(step // unit, 1))
    if count > 1:
        count = min(-(-count // multiple) * multiple, units)  # never more slabs than units
    return [(min(rows, k * units // count * unit), min(rows, (k + 1) * units // count * unit)) for k in range(count)]


def _write_shard(task: ShardTask, slab: Slab, start: int) -> ShardTask:
    return task.write({k: v() if callable(v) else v for k, v in slab.items()}, start)
