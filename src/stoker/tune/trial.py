"""One trial: a loader built with one setting, a few batches read with a simulated step, measured.

The trial reads ``warmup`` batches first (worker start, first reads) and then times ``batches``
batches (more while ``min_seconds`` have not passed: short trials are noisy): the rate counts rows
per second over them, and the *wait share* is the part of that time the consumer spent waiting for
the next batch rather than in its step. A trial given ``stable`` (a screening trial) ends as soon
as its rate has settled: the timed batches cut in three equal runs give rates whose relative
standard deviation is under ``stable``, once ``batches`` and ``min_seconds`` are reached; it never
runs past ``max_seconds``. The step is a pure-Python
busy loop holding the GIL for ``step_ms`` per batch, as a Python-heavy training step does. An
epoch shorter than the trial starts the next one. Any exception while building or reading
(``MemoryError`` included) makes a failed trial that carries the error; ``KeyboardInterrupt``
is not caught.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Trial:
    """One measured setting: its rate (rows/s) and wait share, or the error that ended it."""

    setting: dict[str, Any]
    rate: float | None
    wait_share: float | None
    seconds: float
    rows: int = 0
    batch_bytes: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "rows_per_s": self.rate,
            "wait_share": self.wait_share,
            "seconds": round(self.seconds, 3),
            "rows": self.rows,
            "batch_bytes": self.batch_bytes,
            "error": self.error,
        }


def busy_step(ms: float) -> None:
    """Hold the GIL in pure Python for ``ms`` milliseconds (a Python-heavy training step)."""
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


def nbytes(value: Any) -> int:
    """Bytes of a batch: tensors' and arrays' data, bytes and strings, through dicts and lists."""
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    return int(getattr(value, "nbytes", 0))


def rows_of(batch: Any) -> int:
    """Rows of a batch (the length of its first value)."""
    first = next(iter(batch.values())) if isinstance(batch, dict) else batch[0]
    return len(first)


def run_trial(
    make: Callable[[dict[str, Any]], Any],
    setting: dict[str, Any],
    *,
    batches: int,
    step_ms: float = 0.0,
    warmup: int = 2,
    min_seconds: float = 0.0,
    stable: float | None = None,
    max_seconds: float | None = None,
) -> Trial:
    """Build ``make(setting)``, read ``warmup`` + ``batches`` batches with the step (and on until
    ``min_seconds`` have passed since the first timed batch), and measure them. With ``stable``,
    the trial goes on until its rate is stable (see the module's docstring) or ``max_seconds``."""
    t_start = time.perf_counter()
    loader = None
    try:
        loader = make(setting)
        end = Ending(batches, warmup, min_seconds, stable, max_seconds)
        return _measure(loader, setting, end, step_ms, t_start)
    except Exception as exc:  # a failed trial is a result: the search goes on (MemoryError is an Exception)
        return Trial(setting, None, None, time.perf_counter() - t_start, error=f"{type(exc).__name__}: {exc}")
    finally:
        close = getattr(loader, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class Ending:
    """When a trial ends: ``batches`` timed and ``min_seconds`` passed; with ``stable``, also a
    settled rate (relative std of the three thirds' rates under it) or ``max_seconds`` passed."""

    batches: int
    warmup: int = 2
    min_seconds: float = 0.0
    stable: float | None = None
    max_seconds: float | None = None

    def done(self, marks: list[float]) -> bool:
        """Whether to stop, given ``marks``: the start of the timed span, then the end of each timed step."""
        timed = len(marks) - 1
        if timed < self.batches:
            return False
        elapsed = marks[-1] - marks[0]
        if self.max_seconds is not None and elapsed >= self.max_seconds:
            return True
        if elapsed < self.min_seconds:
            return False
        return self.stable is None or settled(marks, self.stable)


def settled(marks: list[float], tolerance: float) -> bool:
    """Whether the rates of the three equal runs of timed batches agree (relative std < ``tolerance``)."""
    timed = len(marks) - 1
    if timed < 3:
        return False
    cut = [round(i * timed / 3) for i in range(4)]
    rates = [(cut[i + 1] - cut[i]) / max(marks[cut[i + 1]] - marks[cut[i]], 1e-9) for i in range(3)]
    mean = sum(rates) / 3
    std = (sum((r - mean) ** 2 for r in rates) / 3) ** 0.5
    return std < tolerance * mean


def _measure(loader: Any, setting: dict[str, Any], end: Ending, step_ms: float, t_start: float) -> Trial:
    warmup = end.warmup
    rows = seen = size = 0
    waited = 0.0
    t0: float | None = None
    t_end = t_start
    marks: list[float] = []  # the timed span's start, then the end of each timed step

    def more() -> bool:
        return seen < warmup or not end.done(marks)

    while more():
        it = iter(loader)
        got = False
        while more():
            asked = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            got = True
            if seen == warmup:
                t0, waited, rows = asked, 0.0, 0
                marks.append(asked)
            waited += time.perf_counter() - asked
            rows += rows_of(batch)
            size = size or nbytes(batch) // max(1, rows_of(batch))
            seen += 1
            busy_step(step_ms)
            t_end = time.perf_counter()  # the measured span ends with the last step, not the loader's close
            if t0 is not None:
                marks.append(t_end)
        close = getattr(it, "close", None)
        if close is not None:
            close()
        if not got:
            raise RuntimeError("the loader gave no batch: the store is empty or smaller than one batch with drop_last")
    elapsed = t_end - (t0 if t0 is not None else t_start)
    return Trial(
        setting,
        rows / elapsed,
        waited / elapsed,
        time.perf_counter() - t_start,
        rows=rows,
        batch_bytes=size * rows // max(1, seen - warmup),
    )
