"""``engine="auto"``: threads or processes, chosen from the core count and measured GIL contention.

The rule (also in :class:`stoker.LoaderConfig`'s docstring):

1. ``num_workers=0``: nothing runs beside the consumer; threads (the reads run in its thread).
2. One usable core (affinity and cgroup quota, ``pipeline/schedule.py``): processes cannot run beside the consumer; threads.
3. Otherwise the first tasks of the first pass run on worker threads and are measured: for each
   read, its wall time, the thread's CPU time (``time.thread_time``) and its time runnable but
   waiting for a core (``/proc/thread-self/schedstat``). What is left, ``wall - cpu - run queue``,
   is time the thread slept: waiting for the GIL (held by the consumer's training step or by a
   sibling worker), or for I/O. Reads count once the consumer has its first batch; measuring
   stops after :data:`MIN_READS` of them and :data:`MIN_SECONDS` of their read time (or
   :data:`MAX_TASKS` tasks). Their *blocked share* is that sleep over the reads' time off the
   run queue (``wall - run queue``: on a CPU or asleep). When it is at least
   :data:`BLOCKED_FOR_PROCESSES` (25 %), the rest of the pass and the later ones run in
   processes, where each worker has its own GIL. Short reads of pure Python hide their GIL waits
   between reads instead, so a second measure counts too: if the consumer waited for data at least
   :data:`CONSUMER_WAITING` (half) of the span while the reads' CPU and run-queue time add up to at
   most :data:`SERIAL` (0.6) of ``min(workers, cores)`` reads at once, the reads ran one at a time,
   and processes are chosen. Else threads stay. A pass too short to measure keeps threads and the
   next pass measures again.

Waiting for a core is left out on purpose, of the sleep and of the time it is a share of: processes
would wait for a core too, and on a busy host (the reads sharing the cores with the training step and
other programs) a share of the whole wall time hides the GIL waits behind the queue
(``docs/design-notes.md`` has the image reads that showed it). The consumer's share of
CPU time over the same span is reported beside it (a training step of pure Python holds the GIL
about that share of the time). The choice is made once per loader and said in
``loader.report()`` and ``loader.engine_choice``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from stoker.pipeline.executor import Executor, Produced
from stoker.pipeline.schedule import usable_cores

BLOCKED_FOR_PROCESSES = 0.25  # blocked share of the worker threads' read time that picks processes
CONSUMER_WAITING = 0.5  # the consumer waited for data at least this share of the span...
SERIAL = 0.6  # ...while reads ran at most this share of min(workers, cores) at once: GIL-bound
MIN_READS = 8  # measured reads needed for a decision that holds...
MIN_SECONDS = 0.25  # ...and seconds of read time among them (a GIL switch interval is 5 ms)
MAX_TASKS = 256  # tasks measured at most


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
        blocked: share of those reads' time off the run queue (wall - queued) the worker threads
            slept (GIL or I/O), or None.
        queued: share of their wall time they were runnable but waiting for a core, or None.
        consumer_cpu: share of the measured span the consumer's thread was on a CPU, or None.
        settled: False when too little was measured: the next pass measures again.
        parallel: reads on (or queued for) a core at once, on average over the measured span.
        consumer_waiting: share of that span the consumer waited for batches.
    """

    engine: str
    reason: str
    cores: int
    reads: int = 0
    blocked: float | None = None
    queued: float | None = None
    consumer_cpu: float | None = None
    settled: bool = True
    parallel: float | None = None
    consumer_waiting: float | None = None

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
        self._waited = 0.0  # seconds the consumer waited for chunks since then

    def timed(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``fn`` measured on every call (runs in a worker thread)."""

        def measured(task: Any) -> Any:
            # the run queue is read first at both ends: reading it may wait for the GIL, which
            # must fall inside the interval (wall) and not only in the run queue's count
            queued = _run_queue_ns()
            start, cpu = time.perf_counter(), time.thread_time()
            out = fn(task)
            queued_end = _run_queue_ns()
            end, cpu_end = time.perf_counter(), time.thread_time()
            wait = None if queued is None or queued_end is None else (queued_end - queued) / 1e9
            with self._lock:
                self._reads.append((start, end - start, cpu_end - cpu, wait))
            return out

        return measured

    def take(self, tasks: Iterator[Any]) -> Iterator[Any]:
        """Tasks from ``tasks`` until enough were measured (the threads pull them as they go)."""
        for n, task in enumerate(tasks):
            yield task
            if n + 1 >= MAX_TASKS or self._enough():
                return

    def _enough(self) -> bool:
        since = self._since
        if since is None:
            return False
        with self._lock:
            counted = [r[1] for r in self._reads if r[0] >= since]
        return len(counted) >= MIN_READS and sum(counted) >= MIN_SECONDS

    def consumer_started(self) -> None:
        """The consumer got its first batch (call from its thread): reads from now on count."""
        if self._since is None:
            self._since = time.perf_counter()
            self._consumer = (self._since, time.thread_time(), threading.get_ident())

    def waited(self, seconds: float) -> None:
        """The consumer waited ``seconds`` for a chunk (call from its thread)."""
        if self._since is not None:
            self._waited += seconds

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
        span = time.perf_counter() - since
        consumer = None
        if self._consumer is not None and self._consumer[2] == threading.get_ident() and span > 0:
            consumer = (time.thread_time() - self._consumer[1]) / span
        if len(reads) < MIN_READS or not span > 0:
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
        queued = sum(r[3] or 0.0 for r in reads) if all(r[3] is not None for r in reads) else None
        active = wall - (queued or 0.0)  # on a CPU or asleep: the time a process would not have waited either
        blocked = max(0.0, active - cpu) / active if active > 0 else 0.0
        parallel = (cpu + (queued or 0.0)) / span  # reads on (or queued for) a core at once, on average
        waiting = self._waited / span
        serial = waiting >= CONSUMER_WAITING and parallel <= SERIAL * min(self.workers, cores) and self.workers > 1
        figures = (
            f"worker threads slept {blocked:.0%} of their read time"
            + ("" if queued is None else " off the run queue")
            + f" (GIL or I/O) over {len(reads)} reads"
            + ("" if queued is None else f", waited {queued / wall if wall else 0:.0%} of their wall time for a core")
            + f"; {parallel:.2f} of {self.workers} reads ran at once while the consumer waited {waiting:.0%} of "
            + "the time"
            + ("" if consumer is None else f" and was on a CPU {consumer:.0%} of it")
        )
        if blocked >= BLOCKED_FOR_PROCESSES:
            engine, rule = "processes", f"slept >= {BLOCKED_FOR_PROCESSES:.0%}"
        elif serial:
            engine, rule = "processes", "the reads ran one at a time: they hold the GIL"
        else:
            engine, rule = (
                "threads",
                f"slept < {BLOCKED_FOR_PROCESSES:.0%}, reads ran in parallel or were not waited for",
            )
        return EngineChoice(
            engine,
            f"{figures} ({rule}); {cores} cores",
            cores,
            len(reads),
            blocked,
            None if queued is None or not wall else queued / wall,
            consumer,
            parallel=parallel,
            consumer_waiting=waiting,
        )


def measured_then_chosen(
    tasks: Iterator[Any], calibration: Calibration, threads: Executor, choose: Callable[[EngineChoice], Executor]
) -> Produced:
    """A pass of ``engine="auto"``: the first tasks on the measured ``threads`` executor, then
    ``choose(decision)``'s executor for the rest (the results say when they come from processes)."""
    first = calibration.take(tasks)

    def results() -> Generator[Any, None, None]:
        asked = time.perf_counter()
        for chunk in threads.map(first):
            calibration.waited(time.perf_counter() - asked)
            calibration.consumer_started()  # the consumer's loop begins with this chunk
            yield chunk
            asked = time.perf_counter()
        executor = choose(calibration.decide())
        produced.in_processes = executor.in_processes
        yield from executor.map(tasks)

    produced = Produced(results(), False)
    return produced


@dataclass(frozen=True)
class AutoReport:
    """``loader.report()`` with ``engine="auto"``: the engine choice beside the source's report."""

    engine: EngineChoice | None
    source: Any

    def __str__(self) -> str:
        choice = str(self.engine) if self.engine is not None else "engine='auto': not chosen yet (no pass has run)"
        return choice if self.source is None else f"{choice}\n{self.source}"


__all__ = [
    "AutoReport",
    "BLOCKED_FOR_PROCESSES",
    "Calibration",
    "EngineChoice",
    "measured_then_chosen",
]
