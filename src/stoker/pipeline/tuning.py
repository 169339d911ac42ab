"""The online tuner's records (``pipeline/autotune.py``, ``pipeline/autotune_policy.py``): its bounds, one window's figures (counted,
then measured), a change still to verify, one decision, and the report ``loader.report()`` gives with ``"auto"`` settings."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

MAX_PREFETCH = 8  # chunks in flight per worker at most


@dataclass(frozen=True)
class Bounds:
    """Where the tuner may move: workers and prefetch ranges, the bytes in flight at most."""

    max_workers: int
    max_prefetch: int = MAX_PREFETCH
    memory_budget: int | None = None
    jump_to: int | None = None  # the most workers an estimate jumps to (the cores; past it one at a time)


@dataclass(frozen=True)
class Measure:
    """One window's figures (see the module docstring)."""

    wall: float
    waited: float
    batches: int
    busy: float  # busy share of the workers, 0..1 (or more with tasks that began before the window)
    ready: float = 0.0  # mean results done when the consumer asked
    tasks: int = 0  # worker tasks that ended in the window
    jitter: float = 0.0  # the spread of the task times: their standard deviation / their mean
    task_s: float = 0.0  # the mean seconds of a worker task that ended in the window (0: none timed)
    cpu: float | None = None  # the loader's process tree's CPU time over the window's wall x usable cores

    @property
    def wait_share(self) -> float:
        return self.waited / self.wall if self.wall > 0 else 0.0

    @property
    def rate(self) -> float:
        return self.batches / self.wall if self.wall > 0 else 0.0

    @property
    def step(self) -> float:
        """The consumer's seconds per batch outside its wait."""
        return max(0.0, self.wall - self.waited) / max(1, self.batches)

    @property
    def period(self) -> float:
        """Seconds between batches."""
        return self.wall / max(1, self.batches)

    def figures(self) -> str:
        """The window's figures in words."""
        read = f", {self.task_s * 1e3:.2f} ms per task" if self.tasks else ""
        cpu = "" if self.cpu is None else f", cores {self.cpu:.0%} used"
        return (
            f"wait {self.wait_share:.0%}, {self.rate:.1f} batches/s, workers busy {self.busy:.0%}{read}, "
            f"{self.ready:.1f} results ready when asked{cpu}"
        )


class Window:
    """One window's figures as they are counted: batches, the consumer's wait and the queue's
    occupancy in the consumer's thread (:meth:`batch`), task times in the worker threads (:meth:`task`)."""

    def __init__(self, start: float, cpu: dict[int, float] | None = None) -> None:
        self.start = start
        self.cpu = cpu  # the process tree's CPU seconds by pid at the start, when known
        self.waited = 0.0
        self.batches = 0
        self.ready = 0
        self.outstanding = 0.0  # sum over batches of the share of workers with a task not done
        self._lock = threading.Lock()
        self.busy = self.busy2 = 0.0  # task seconds, and the sum of their squares
        self.tasks = 0

    def batch(self, waited: float, ready: int, outstanding: float) -> None:
        self.waited += waited
        self.batches += 1
        self.ready += ready
        self.outstanding += outstanding

    def task(self, spent: float) -> None:
        with self._lock:
            self.busy += spent
            self.busy2 += spent * spent
            self.tasks += 1

    def measure(
        self, now: float, threads: int, processes: bool, cpu: dict[int, float] | None = None, cores: int = 1
    ) -> Measure:
        """The window's :class:`Measure` at ``now``, for ``threads`` workers (``processes``: busy share
        from the tasks outstanding, their tasks are not timed here); ``cpu``: the process tree's CPU
        seconds by pid now, over ``cores`` usable cores (a process that began in the window counts
        all its time, one that ended none)."""
        wall = now - self.start
        with self._lock:
            busy, busy2, tasks = self.busy, self.busy2, self.tasks
        batches = max(1, self.batches)
        share = self.outstanding / batches if processes else busy / (threads * wall) if wall > 0 else 0.0
        jitter = 0.0
        if tasks > 1 and busy > 0:
            mean = busy / tasks
            jitter = max(0.0, busy2 / tasks - mean * mean) ** 0.5 / mean
        task_s = busy / tasks if tasks else 0.0
        used = None
        if cpu is not None and self.cpu is not None and wall > 0:
            before = self.cpu
            used = sum(max(0.0, t - before.get(pid, 0.0)) for pid, t in cpu.items()) / (wall * cores)
        return Measure(wall, self.waited, self.batches, share, self.ready / batches, tasks, jitter, task_s, used)


@dataclass
class Trial:
    """A change of the online tuner still to verify: what it was, the setting before it, that setting's
    mean rate and mean wait share, and the figures of the windows seen since."""

    action: str
    before: float
    waited: float
    workers: int
    prefetch: int
    rates: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Decision:
    """One change (or a held setting) of the online tuner, with the figures it was made on.

    Attributes:
        at: ``time.perf_counter()`` when it was made.
        since_start: seconds since the tuner's first pass began.
        action: ``"add worker"`` (one or more, to the estimate), ``"retire worker"`` (one or more),
            ``"drop worker"`` (one fewer while the consumer waits), ``"deepen"``, ``"inline"``,
            ``"undo"``, ``"hold"``, ``"step changed"`` or ``"fixed"``
            (a setting picked once, not tuned).
        workers, prefetch: the settings from now on.
        wait_share: the consumer's wait share over the window.
        rate: batches per second over the window.
        busy: the workers' busy share over the window.
        reason: why, in words, with the window's figures (queue occupancy and time per task too).
    """

    at: float
    since_start: float
    action: str
    workers: int
    prefetch: int
    wait_share: float
    rate: float
    busy: float
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.since_start:7.2f}s  {self.action:<13} -> {self.workers} worker(s), prefetch {self.prefetch}: "
            f"{self.reason}"
        )


def nbytes(batch: Any) -> int:
    """Bytes of a batch: arrays' and tensors' data, bytes and strings (UTF-8), through dicts, lists and tuples."""
    if isinstance(batch, dict):
        return sum(nbytes(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(nbytes(v) for v in batch)
    if isinstance(batch, (bytes, bytearray, memoryview)):
        return len(batch)
    if isinstance(batch, str):
        return len(batch.encode("utf-8"))
    return int(getattr(batch, "nbytes", 0) or 0)


@dataclass(frozen=True)
class TuneReport:
    """``loader.report()`` with online tuning: the settings now, every decision, and the report underneath."""

    workers: int
    prefetch: int
    decisions: tuple[Decision, ...]
    inner: Any

    def __str__(self) -> str:
        lines = [
            f"online tuning: {self.workers} worker(s), prefetch {self.prefetch}; {len(self.decisions)} decision(s)"
        ]
        lines += [f"  {d}" for d in self.decisions]
        if self.inner is not None:
            lines.append(str(self.inner))
        return "\n".join(lines)


__all__ = [
    "Bounds",
    "Decision",
    "Measure",
    "Trial",
    "TuneReport",
    "Window",
    "nbytes",
]
