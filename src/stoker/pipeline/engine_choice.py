"""``engine="auto"``: threads or processes, chosen from the core count and measured GIL contention.

The rule (also in :class:`stoker.LoaderConfig`'s docstring):

1. ``num_workers=0``: nothing runs beside the consumer; threads (the reads run in its thread).
2. One usable core (``os.sched_getaffinity``): processes cannot run beside the consumer; threads.
3. Otherwise the first tasks of the first pass run on worker threads and are measured: for each
   read, its wall time, the thread's CPU time (``time.thread_time``) and its time runnable but
   waiting for a core (``/proc/thread-self/schedstat``). What is left, ``wall - cpu - run queue``,
   is time the thread slept: waiting for the GIL (held by the consumer's training step or by a
   sibling worker), or for I/O. When that *blocked share* of the reads started after the consumer
   had its first batch is at least :data:`BLOCKED_FOR_PROCESSES` (25 %), the rest of the pass and
   the later ones run in processes, where each worker has its own GIL; else threads stay.

Waiting for a core is left out on purpose: processes would wait for it too. The consumer's share of
CPU time over the same span is reported beside it (a training step of pure Python holds the GIL
about that share of the time). The choice is made once per loader and said in
``loader.report()`` and ``loader.engine_choice``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BLOCKED_FOR_PROCESSES = 0.25  # blocked share of the worker threads' read time that picks processes
MIN_READS = 2  # measured reads needed for a decision that holds


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _run_queue_ns() -> int | None:
    """Nanoseconds this thread has spent runnable but waiting for a core, or None where unknown."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class EngineChoice:
    """What ``engine="auto"`` chose and the figures it chose by.

    Attributes:
        engine: ``"threads"`` or ``"processes"``.
        reason: the rule that decided, in words.
        cores: usable cores.
        reads: worker reads measured (0 when the core count or ``num_workers`` decided).
        blocked: share of those reads' wall time the worker threads slept (GIL or I/O), or None.
        queued: share they were runnable but waiting for a core, or None.
        consumer_cpu: share of the measured span the consumer's thread was on a CPU, or None.
        settled: False when too little was measured: the next pass measures again.
    """

    engine: str
    reason: str
    cores: int
    reads: int = 0
    blocked: float | None = None
    queued: float | None = None
    consumer_cpu: float | None = None
    settled: bool = True

    def __str__(self) -> str:
        return f"engine='auto' chose {self.engine}: {self.reason}"


class Calibration:
    """Times worker reads on threads and the consumer's CPU use, then applies the rule."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._reads: list[tuple[float, float, float, float | None]] = []  # start, wall, cpu, queued
        self._since: float | None = None  # when the consumer had its first batch
        self._consumer: tuple[float, float, int] | None = None  # (wall, thread CPU, thread) at that moment

    def timed(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``fn`` measured on every call (runs in a worker thread)."""

        def measured(task: Any) -> Any:
            start, cpu, queued = time.perf_counter(), time.thread_time(), _run_queue_ns()
            out = fn(task)
            end, cpu_end, queued_end = time.perf_counter(), time.thread_time(), _run_queue_ns()
            wait = None if queued is None or queued_end is None else (queued_end - queued) / 1e9
            with self._lock:
                self._reads.append((start, end - start, cpu_end - cpu, wait))
            return out

        return measured

    def consumer_started(self) -> None:
        """The consumer got its first batch (call from its thread): reads from now on count."""
        if self._since is None:
            self._since = time.perf_counter()
            self._consumer = (self._since, time.thread_time(), threading.get_ident())

    def decide(self) -> EngineChoice:
        """Apply the rule to what was measured (call from the consumer's thread)."""
        cores = usable_cores()
        if self.workers == 0:
            return EngineChoice("threads", "num_workers=0 reads in the consumer's thread", cores)
        if cores < 2:
            return EngineChoice("threads", "one usable core: worker processes could not run beside the consumer", cores)
        since = self._since if self._since is not None else float("inf")
        with self._lock:
            reads = [r for r in self._reads if r[0] >= since]
        consumer = None
        if self._consumer is not None and self._consumer[2] == threading.get_ident():
            wall = time.perf_counter() - self._consumer[0]
            consumer = (time.thread_time() - self._consumer[1]) / wall if wall > 0 else None
        if len(reads) < MIN_READS:
            return EngineChoice(
                "threads",
                f"only {len(reads)} read(s) ran while the consumer looped, too few to measure; threads kept",
                cores,
                len(reads),
                consumer_cpu=consumer,
                settled=False,
            )
        wall = sum(r[1] for r in reads)
        cpu = sum(r[2] for r in reads)
        queued = None if any(r[3] is None for r in reads) else sum(r[3] or 0.0 for r in reads)
        blocked = max(0.0, wall - cpu - (queued or 0.0)) / wall if wall > 0 else 0.0
        queued_share = None if queued is None else queued / wall if wall > 0 else 0.0
        figures = (
            f"worker threads slept {blocked:.0%} of their read time (GIL or I/O) over {len(reads)} reads"
            + ("" if queued_share is None else f", waited {queued_share:.0%} for a core")
            + ("" if consumer is None else f", the consumer was on a CPU {consumer:.0%} of the time")
        )
        engine = "processes" if blocked >= BLOCKED_FOR_PROCESSES else "threads"
        rule = f"{'>=' if engine == 'processes' else '<'} {BLOCKED_FOR_PROCESSES:.0%}"
        return EngineChoice(
            engine, f"{figures} ({rule}); {cores} cores", cores, len(reads), blocked, queued_share, consumer
        )


@dataclass(frozen=True)
class AutoReport:
    """``loader.report()`` with ``engine="auto"``: the engine choice beside the source's report."""

    engine: EngineChoice | None
    source: Any

    def __str__(self) -> str:
        choice = str(self.engine) if self.engine is not None else "engine='auto': not chosen yet (no pass has run)"
        return choice if self.source is None else f"{choice}\n{self.source}"


__all__ = ["AutoReport", "BLOCKED_FOR_PROCESSES", "Calibration", "EngineChoice", "usable_cores"]
