"""``Executor``: one ordered map over worker threads or worker processes, as a schedule says.

The loader runs every source through one executor, made from its
:class:`~stoker.pipeline.schedule.Schedule` (engine, workers, prefetch depth). Engine ``"threads"`` runs the work in
threads of this process (:func:`~stoker.pipeline.threads.ordered_map`): right for work that
releases the GIL in long calls (gathers, the Rust tokenizer, libjpeg-turbo). ``"processes"``
runs it in worker processes (:class:`~stoker.pipeline.processes.ProcessPool`), the results
written into shared-memory batch slots and handed out from there with no copy: right for user
Python (a Dataset's ``__getitem__``, user transforms) and for hosts with many cores.
Zero workers run the work in the calling thread with either engine. ``knobs``
(:class:`~stoker.pipeline.threads.Knobs`) let the online tuner (``pipeline/autotune.py``) resize
the pool and its depth while it runs.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.pipeline.processes import ProcessPool
from stoker.pipeline.schedule import ENGINES, Schedule, chunk_size
from stoker.pipeline.slots import SlotPlan
from stoker.pipeline.threads import Knobs, ThreadPool, ordered_map


class Executor:
    """Yield ``fn(item)`` for each item, in order, computed by the schedule's workers.

    Args:
        fn: the work; for processes it reaches the workers by fork when the pool starts.
        schedule: the engine (``"threads"`` or ``"processes"``), the workers (0 runs ``fn`` in the
            calling thread) and the prefetch depth (items in flight: workers x prefetch).
        timeout: seconds to wait for one result (None: forever).
        stage: the name errors and timeouts are tagged with.
        persistent: keep the workers between :meth:`map` calls until :meth:`close`: worker
            processes, and worker threads (a pass then starts no thread). With ``knobs`` the kept threads
            start when a map first wants one and are resized by every map; a map at 0 workers leaves them idle.
        slots: how the process pool makes its shared-memory batch slots (``pipeline/slots.py``).
        knobs: the worker count and depth, read while the map runs (they replace ``workers`` and
            ``depth`` there); worker processes read only the depth.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        schedule: Schedule,
        timeout: float | None = None,
        stage: str = "read",
        persistent: bool = False,
        slots: SlotPlan | None = None,
        knobs: Knobs | None = None,
    ) -> None:
        if schedule.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {ENGINES}, not {schedule.engine!r}", option="engine")
        self.fn = fn
        self.method = schedule.engine
        self.workers = schedule.workers
        self.depth = max(1, schedule.workers) * schedule.prefetch
        self.timeout = timeout
        self.stage = stage
        self.persistent = persistent
        self.slots = slots
        self.knobs = knobs
        self._pool: ProcessPool | None = None
        self._threads: ThreadPool | None = None  # kept between maps: persistent, threads
        self.owner = os.getpid()

    def serves(self, schedule: Schedule, knobs: Knobs | None) -> bool:
        """Whether this executor can run the next pass of ``schedule``: the same engine and count, or
        resized by the same ``knobs`` (an online tuner's) whatever count it started with."""
        same = self.workers == schedule.workers or (knobs is not None and self.knobs is knobs)
        return self.method == schedule.engine and same and self.owner == os.getpid()  # not a fork()'s copy

    @property
    def in_processes(self) -> bool:
        """Whether ``fn`` runs in other processes (its results then crossed shared memory)."""
        return self.method == "processes" and self.workers > 0

    def map(self, items: Iterable[Any]) -> Generator[Any, None, None]:
        if not self.in_processes:
            pool = None
            if self.persistent:  # threads kept between maps; with knobs, started once the tuner wants one
                wanted = self.workers if self.knobs is None else self.knobs.workers
                if self._threads is not None and self._threads.broken:
                    self._threads = None  # stopped by the map that timed out
                if self._threads is None and wanted > 0:
                    self._threads = ThreadPool(wanted, f"stoker-{self.stage}")
                pool = self._threads
            return ordered_map(
                self.fn,
                items,
                workers=self.workers,
                depth=self.depth,
                stage=self.stage,
                timeout=self.timeout,
                knobs=self.knobs,
                pool=pool,
            )
        if self._pool is None:
            self._pool = ProcessPool(self.fn, self.workers, self.stage, self.slots)
        return self._pooled(self._pool, items)

    def _pooled(self, pool: ProcessPool, items: Iterable[Any]) -> Generator[Any, None, None]:
        try:
            yield from pool.map(items, depth=self.depth, timeout=self.timeout, knobs=self.knobs)
        finally:
            if not self.persistent:
                self.close()

    def close(self) -> None:
        """Stop the worker processes or threads kept between calls. Idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.stop(wait=self.timeout if self.timeout is not None else 5.0)


def chunked(batches: Iterable[np.ndarray], size: int) -> Iterator[list[np.ndarray]]:
    """Group consecutive index arrays into lists of ``size`` (the last may be shorter)."""
    chunk: list[np.ndarray] = []
    for b in batches:
        chunk.append(b)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def growing_chunks(batches: Iterable[np.ndarray], limit: Callable[[], int]) -> Iterator[tuple[int, list[np.ndarray]]]:
    """``(first, chunk)``: consecutive index arrays grouped in chunks of 1, 2, 4, ... batches, each
    twice the one before, up to ``limit()``, which is asked again before each chunk (a source that
    learns the size of its batches during the pass gets larger chunks from then on). ``first`` is
    the number of the chunk's first batch: the batches of the chunks before it.

    Small first chunks bring the first batch fast (one batch read, not a whole chunk); the chunks
    then reach their full size within a few tasks."""
    it = iter(batches)
    first, grow = 0, 1
    while True:
        size = max(1, min(grow, limit()))
        chunk = list(itertools.islice(it, size))
        if not chunk:
            return
        yield first, chunk
        first += len(chunk)
        grow = 2 * size


def announced(
    batches: Iterable[np.ndarray], upcoming: Callable[[list[np.ndarray]], None], ahead: int
) -> Iterator[np.ndarray]:
    """``batches`` unchanged, each handed to ``upcoming`` once, in order, ``ahead`` batches before
    it is taken from here: when a chunk's batches are taken (its task goes in flight), the next
    ``ahead`` batches beyond it are already announced."""
    it = iter(batches)
    buffered: deque[np.ndarray] = deque()
    while True:
        new = list(itertools.islice(it, ahead + 1 - len(buffered)))
        if new:
            upcoming(new)
            buffered.extend(new)
        if not buffered:
            return
        yield buffered.popleft()


MIN_PART_ROWS = 8  # a first batch read in parts (rowwise sources): rows of each part at least


def peek(batches: Iterable[np.ndarray]) -> tuple[np.ndarray | None, Iterator[np.ndarray]]:
    """The first of ``batches`` (None when there is none), and all of them."""
    it = iter(batches)
    head = next(it, None)
    return head, it if head is None else itertools.chain([head], it)


def first_parts(first: np.ndarray | None, workers: int) -> int:
    """In how many parts a pass reads its first batch ``first`` when its source is ``rowwise``: one
    per worker, each of :data:`MIN_PART_ROWS` rows at least (1: read whole)."""
    return 1 if first is None else max(1, min(workers, len(first) // MIN_PART_ROWS))


def pass_tasks(
    epoch: int,
    batches: Iterable[np.ndarray],
    batch_bytes: Callable[[], float | None],
    upcoming: Callable[[list[np.ndarray]], None] | None = None,
    most: int | None = None,
    announce: int = 0,
    parts: int = 1,
    readahead: Callable[[list[np.ndarray]], None] | None = None,
    window: int = 1,
) -> tuple[int, Iterator[tuple[int, int, list[np.ndarray]]]]:
    """A pass's worker tasks ``(epoch, first batch, chunk)`` (see :func:`growing_chunks`), and the
    most batches a chunk holds by default: size buffers made before the pass as ``batch_bytes() * that``.

    ``batch_bytes`` (the source's, for the loader's batch size) is asked before each chunk. When it
    is known at the start, no chunk exceeds what it said then (buffers sized by it hold every
    chunk); when it is None at the start (buffers learn their size), chunks grow to what it says
    once known. ``upcoming`` (the source's hook), when given, learns each batch one full chunk
    ahead, or ``announce`` batches when that is more: the next that many batches beyond the tasks
    in flight (:func:`announced`). ``most`` (the loader's ``chunk_size``), when given, bounds
    every chunk instead of the size derived from ``batch_bytes``.

    First batch first: with ``parts`` > 1 the first batch is read as that many tasks, each of
    consecutive rows of it (:func:`first_parts`; the consumer joins their results), so every worker
    works on it before any works on a later one. ``readahead`` (the source's hook) is told of the
    batches of the first ``window`` chunks (the tasks in flight as the pass starts), the first one now.
    """
    known = batch_bytes()
    largest = chunk_size(known) if most is None else most

    def limit() -> int:
        if most is not None:
            return most
        size = chunk_size(batch_bytes())
        return size if known is None else min(size, largest)

    if readahead is not None:
        head, batches = peek(batches)
        if head is not None:
            readahead([head])  # now, before any worker starts
    if upcoming is not None:
        batches = announced(batches, upcoming, max(largest, announce))

    def tasks() -> Iterator[tuple[int, int, list[np.ndarray]]]:
        for first, chunk in growing_chunks(batches, limit):
            if readahead is not None and 0 < first < window * largest:  # one call per chunk, as it goes out
                readahead(chunk)
            if first == 0 and parts > 1:  # the first chunk is one batch (growing_chunks)
                yield from ((epoch, 0, [part]) for part in np.array_split(chunk[0], parts))
            else:
                yield epoch, first, chunk

    return largest, tasks()


__all__ = [
    "MIN_PART_ROWS",
    "Executor",
    "announced",
    "chunk_size",
    "chunked",
    "first_parts",
    "growing_chunks",
    "pass_tasks",
    "peek",
]
