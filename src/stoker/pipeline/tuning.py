"""The online tuner's records (``pipeline/autotune.py``): its bounds, one window's figures, one
decision, and the report ``loader.report()`` gives with ``"auto"`` settings."""

from __future__ import annotations

from dataclasses import dataclass
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

    def figures(self, workers: int) -> str:
        """The window's figures in words."""
        read = f", {self.busy * workers * self.wall / self.tasks * 1e3:.1f} ms per task" if self.tasks else ""
        return (
            f"wait {self.wait_share:.0%}, {self.rate:.1f} batches/s, workers busy {self.busy:.0%}{read}, "
            f"{self.ready:.1f} results ready when asked"
        )


@dataclass(frozen=True)
class Decision:
    """One change (or a held setting) of the online tuner, with the figures it was made on.

    Attributes:
        at: ``time.perf_counter()`` when it was made.
        since_start: seconds since the tuner's first pass began.
        action: ``"add worker"`` (one or more, to the estimate), ``"retire worker"`` (one or more),
            ``"deepen"``, ``"inline"``, ``"undo"``, ``"hold"``, ``"step changed"`` or ``"fixed"``
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
        return f"{self.since_start:7.2f}s  {self.action:<13} -> {self.workers} worker(s), prefetch {self.prefetch}: {self.reason}"


def nbytes(batch: Any) -> int:
    """Bytes of the arrays and tensors of a batch (any nest of dicts, lists and tuples)."""
    if isinstance(batch, dict):
        return sum(nbytes(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(nbytes(v) for v in batch)
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


__all__ = ["Bounds", "Decision", "Measure", "TuneReport", "nbytes"]
