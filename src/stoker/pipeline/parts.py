"""A batch's row copy cut into row ranges and shared with the loader's other worker threads.

The gather of a large batch (a 38 MiB uint8 image batch, a 6 MiB float batch) is one long
memcpy-like call on one core, drawing one core's memory bandwidth. :func:`run_parts` cuts it
into row ranges, each copied straight into its own slice of the preallocated output (no extra
buffer, no concatenation), and offers the ranges to the other worker threads of the pool it
runs in (:mod:`stoker.pipeline.threads`); the calling thread copies ranges too and returns
once every range is copied.

Ranges are claimed, never assigned: a range no other thread took is copied by the caller, so
a busy pool never leaves a copy waiting (no deadlock), and a thread that comes late finds
nothing left and goes back to its own work. Only a thread with no queued task before the offer
takes ranges: when every thread has a batch of its own the batches already draw every thread's
bandwidth, and sharing ranges would only add hand-offs and make one thread wait for another (a
preempted helper stalls the batch it holds a range of). Ranges help when threads would
otherwise wait: fewer batches in flight than threads, the batch the consumer waits for still
being copied while others are done. Outside a pool's worker thread (``num_workers=0``, worker
processes, a user's own call) a copy runs in one piece.

When: ``STOKER_SPLIT_COPIES`` (read when a pool starts, i.e. at each pass) is ``never`` (the default) or ``always``.
Measured side by side (``benchmarks/bench_loader.py --only gather --rounds 3``, 2-vCPU VM, load
1.5, w=2, shuffled): cutting every large copy delivered 0.64x the batches of one copy per thread
on tensors (float32 3x32x32, b512) and 0.88x on images_uint8 (224x224x3, b256); with every worker
thread on a batch of its own, ranges add hand-offs and make one thread wait for another. It helps
only with one batch in flight (images_uint8: 1.55x, tensors 0.94x), hence ``always`` stays for
that case. (The former ``auto`` cut whenever the 1-minute load average left a core spare: on a
quiet machine that was ``always``, 0.68x on tensors in a lead's run at load 0.7; it is refused now,
with a message, rather than read as something else.)

Sizes: a copy under :data:`SPLIT_BYTES` runs in one piece, and no range is smaller than
:data:`PART_BYTES`. Offering a range to another thread and having it picked up costs tens of
microseconds (a queue put, a thread wake-up, the GIL taken back twice); 1 MiB takes ~100-250 us
to copy at 4-10 GB/s, so ranges of at least 1 MiB keep the hand-off a small share, and a copy
of less than two such ranges is not worth cutting. ``benchmarks/bench_loader.py --only gather``
measures both sides.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import numpy as np

from stoker.errors import ConfigError

SPLIT_BYTES = 2 * 2**20  # copies smaller than this run in one piece
PART_BYTES = 2**20  # the smallest range handed to another thread
PARTS_PER_THREAD = 4  # at most this many ranges per thread of the pool: late helpers still find work
SPLIT_ENV = "STOKER_SPLIT_COPIES"  # never (default) | always
SPLIT_MODES = ("never", "always")

_local = threading.local()


class _Job:
    """One copy cut into ranges; any thread may claim the next range until none is left."""

    def __init__(self, copy: Callable[[int, int], None], bounds: np.ndarray) -> None:
        self._copy: Callable[[int, int], None] | None = copy
        self._bounds = bounds
        self._count = len(bounds) - 1
        self._claims = itertools.count()  # next() is atomic under the GIL: each range is claimed once
        self._left = self._count
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.errors: list[BaseException] = []

    def work(self) -> None:
        """Copy ranges until every range is claimed."""
        while True:
            i = next(self._claims)
            if i >= self._count:
                return
            try:
                # not None: this range is not finished, so neither is the job (wait() clears it); no
                # local name keeps the copy (and the buffers it fills) alive after the range
                cast("Callable[[int, int], None]", self._copy)(int(self._bounds[i]), int(self._bounds[i + 1]))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the thread that owns the copy
                with self._lock:
                    self.errors.append(exc)
            finally:
                with self._lock:
                    self._left -= 1
                    if self._left == 0:
                        self._done.set()

    def wait(self) -> None:
        """Block until every claimed range is copied, then drop the copy (and the buffers it holds)."""
        self._done.wait()
        self._copy = None


class Helpers:
    """Where the worker threads of one pool find ranges offered by each other.

    Args:
        threads: the pool's worker threads (the caller included).
        wake: wakes one worker thread that may be waiting for a task (it then calls :meth:`help`).

    ``split``: whether copies are cut at all (``STOKER_SPLIT_COPIES``, read here: once per pool,
    not per copy; a bad value is an error when the pool starts).
    """

    def __init__(self, threads: int, wake: Callable[[], None]) -> None:
        self.split = split_mode() == "always"
        self.threads = threads
        self._offered: deque[_Job] = deque()
        self._wake = wake

    def offer(self, job: _Job, hands: int) -> None:
        for _ in range(hands):
            self._offered.append(job)
            self._wake()

    def help(self) -> None:
        """Copy offered ranges until none is on offer (called by worker threads between tasks)."""
        while True:
            try:
                job = self._offered.popleft()
            except IndexError:
                return
            job.work()
            del job


@contextmanager
def serving(helpers: Helpers) -> Iterator[None]:
    """Make ``helpers`` the pool that :func:`run_parts` calls in this thread offer ranges to."""
    previous = getattr(_local, "helpers", None)
    _local.helpers = helpers
    try:
        yield
    finally:
        _local.helpers = previous


def split_mode() -> str:
    """``STOKER_SPLIT_COPIES``: ``never`` (unset) or ``always``; anything else is a ConfigError."""
    mode = os.environ.get(SPLIT_ENV, "never").strip().lower() or "never"
    if mode not in SPLIT_MODES:
        was = " (auto was removed: it cut copies on a quiet machine, where that is slower)" if mode == "auto" else ""
        raise ConfigError(
            f"{SPLIT_ENV}={os.environ[SPLIT_ENV]!r} is not one of {SPLIT_MODES}{was}: unset it (never), or say always",
            option=SPLIT_ENV,
        )
    return mode


def part_bounds(rows: int, row_bytes: int, threads: int) -> np.ndarray:
    """Row bounds of the ranges a copy of ``rows`` rows of ``row_bytes`` bytes is cut into for a
    pool of ``threads`` threads: ``[0, ..., rows]``, one range when it is not worth cutting."""
    total = rows * row_bytes
    if threads < 2 or rows < 2 or total < SPLIT_BYTES:
        return np.array([0, rows], dtype=np.int64)
    count = int(min(rows, threads * PARTS_PER_THREAD, total // PART_BYTES))
    return np.linspace(0, rows, count + 1).round().astype(np.int64)


def run_parts(rows: int, row_bytes: int, copy: Callable[[int, int], None]) -> None:
    """Call ``copy(start, stop)`` over row ranges covering ``0..rows-1``; ranges go to the other
    worker threads of the calling thread's pool when the copy is large enough (module docstring).

    Returns once every range is copied; an error raised by any range is raised here.
    """
    helpers: Helpers | None = getattr(_local, "helpers", None)
    # the cheap checks first: a copy that is not cut computes no bounds
    if helpers is None or not helpers.split or helpers.threads < 2 or rows * row_bytes < SPLIT_BYTES:
        copy(0, rows)
        return
    bounds = part_bounds(rows, row_bytes, helpers.threads)
    if len(bounds) <= 2:
        copy(0, rows)
        return
    job = _Job(copy, bounds)
    helpers.offer(job, min(len(bounds) - 2, helpers.threads - 1))
    job.work()
    job.wait()
    if job.errors:
        raise job.errors[0]


__all__ = [
    "PART_BYTES",
    "PARTS_PER_THREAD",
    "SPLIT_BYTES",
    "SPLIT_ENV",
    "SPLIT_MODES",
    "Helpers",
    "part_bounds",
    "run_parts",
    "serving",
    "split_mode",
]
