"""One trial: a loader built with one setting, a few batches read with a simulated step, measured.

The trial reads ``warmup`` batches first (worker start, first reads) and then times ``batches``
batches (more while ``min_seconds`` have not passed): the rate counts rows per second over them,
and the *wait share* is the part of that time the consumer spent waiting for the next batch rather
than in its step. The step is a pure-Python busy loop holding the GIL for ``step_ms`` per batch. An
epoch shorter than the trial starts the next one, and that start (the previous pass's close, the
new pass's workers and first reads) is timed like any step. When the trial goes on past its first
pass, that whole pass is warm-up (its timed batches are dropped and the timing starts again).

A trial given ``stable`` (a screen) ends as soon as the confidence interval of its mean batch
interval (90 %, Student's t from :data:`T90`, over up to :data:`BLOCKS` runs of consecutive
batches) is narrower than ``stable`` of it; given ``beat`` (rows/s), also as soon as its interval's
top is below ``beat`` (:meth:`Ending.behind`). A screen looks at its interval after every
1/:data:`LOOK_EVERY` more batches, and ends at ``max_seconds`` of its whole cost (build and
warm-up included). Any exception while building or reading (``MemoryError`` included) makes a
failed trial that carries the error; ``KeyboardInterrupt`` is not caught.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stoker.pipeline.tuning import nbytes

BLOCKS = 8  # runs of consecutive batches (batch means) the interval is computed over, at most
MIN_BLOCKS = 4  # no interval from fewer runs
LOOK_EVERY = 16  # a screen looks at its interval again after 1/16 more timed batches (at least one)
RACE_SPREAD = 0.20  # a screen is dropped by racing only once its interval's half-width is under this share
# Student's t at 95 % one-sided (a 90 % two-sided interval), by degrees of freedom (runs - 1)
T90 = {3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895}


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
    spread: float | None = None  # half-width of the rate's confidence interval over the rate (screens)
    raced: bool = False  # ended early: clearly slower than the rate it had to beat

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
            "spread": None if self.spread is None else round(self.spread, 4),
            "raced": self.raced,
        }


def busy_step(ms: float) -> None:
    """Hold the GIL in pure Python for ``ms`` milliseconds (a Python-heavy training step)."""
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


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
    beat: float | None = None,
) -> Trial:
    """Build ``make(setting)``, read ``warmup`` + ``batches`` batches with the step (and on until
    ``min_seconds`` have passed since the first timed batch), and measure them. With ``stable``,
    the trial goes on until its rate is known within it, or is clearly below ``beat`` (rows/s),
    or ``max_seconds`` (see the module's docstring)."""
    t_start = time.perf_counter()
    loader = None
    try:
        loader = make(setting)
        end = Ending(batches, warmup, min_seconds, stable, max_seconds)
        return _measure(loader, setting, end, step_ms, t_start, beat)
    except Exception as exc:  # a failed trial is a result: the search goes on (MemoryError is an Exception)
        return Trial(setting, None, None, time.perf_counter() - t_start, error=f"{type(exc).__name__}: {exc}")
    finally:
        close = getattr(loader, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class Ending:
    """When a trial ends: ``batches`` timed and ``min_seconds`` passed; with ``stable``, also a
    rate known within ``stable`` (:func:`interval`) or ``max_seconds`` passed; or, with ``stable``
    and a rate to beat, as soon as the rate is clearly below it (:meth:`behind`)."""

    batches: int
    warmup: int = 2
    min_seconds: float = 0.0
    stable: float | None = None
    max_seconds: float | None = None

    def done(self, marks: list[float], beat: float | None = None, spent: float = 0.0) -> bool:
        """Whether to stop, given ``marks``: the start of the timed span, then the end of each timed
        step; ``beat``: batches per second the trial must exceed to matter (screens only);
        ``spent``: seconds the trial has cost so far, its build and warm-up included (the cap counts
        them: :meth:`capped`)."""
        timed = len(marks) - 1
        if self.behind(marks, beat):
            return True
        if timed < self.batches:
            return False
        elapsed = marks[-1] - marks[0]
        if elapsed < self.min_seconds:
            return False
        if self.capped(marks, spent):
            return True
        return self.stable is None or settled(marks, self.stable)

    def capped(self, marks: list[float], spent: float = 0.0) -> bool:
        """Whether ``max_seconds`` have passed: of timed span, or of the trial's whole cost ``spent``."""
        if self.max_seconds is None or len(marks) < 2:
            return False
        return max(marks[-1] - marks[0], spent) >= self.max_seconds

    def behind(self, marks: list[float], beat: float | None) -> bool:
        """Whether a screen is clearly slower than ``beat`` batches/s: the top of its rate's
        interval is below it, once half of ``batches`` (and :data:`MIN_BLOCKS`) were timed over
        half of ``min_seconds`` (a rate over a few fast batches says little: a loader whose first
        batches after the warm-up are slow would be dropped on its start), and only with the
        interval's half-width under :data:`RACE_SPREAD` (a bursty rate is not dropped on a dip)."""
        if self.stable is None or beat is None or len(marks) - 1 < max(MIN_BLOCKS, self.batches // 2):
            return False
        if marks[-1] - marks[0] < self.min_seconds / 2:
            return False
        found = interval(marks)
        return found is not None and found[1] < RACE_SPREAD and found[0] / (1 - found[1]) < beat


def interval(marks: list[float]) -> tuple[float, float] | None:
    """The rate (batches/s) over ``marks`` and the half-width of the confidence interval of the
    mean batch interval as a share of that mean (the rate's interval is ``rate / (1 ± it)``), from
    the batch means of up to :data:`BLOCKS` runs of consecutive batches; None
    with fewer than :data:`MIN_BLOCKS` timed batches."""
    timed = len(marks) - 1
    blocks = min(BLOCKS, timed)
    if blocks < MIN_BLOCKS:
        return None
    cut = [round(i * timed / blocks) for i in range(blocks + 1)]
    means = [(marks[cut[i + 1]] - marks[cut[i]]) / (cut[i + 1] - cut[i]) for i in range(blocks)]
    mean = (marks[-1] - marks[0]) / timed
    if mean <= 0:
        return None
    centre = sum(means) / blocks
    sd = (sum((m - centre) ** 2 for m in means) / (blocks - 1)) ** 0.5
    half = T90[min(blocks - 1, max(T90))] * sd / blocks**0.5
    return 1.0 / mean, half / mean


def settled(marks: list[float], tolerance: float) -> bool:
    """Whether the rate over ``marks`` is known within ``tolerance``: its interval's half-width is under it."""
    found = interval(marks)
    return found is not None and found[1] < tolerance


def _measure(
    loader: Any, setting: dict[str, Any], end: Ending, step_ms: float, t_start: float, beat: float | None = None
) -> Trial:
    warmup = end.warmup
    rows = seen = size = 0
    waited = 0.0
    clock = 0.0  # seconds timed so far: every step since the timed span began, pass starts included
    marks: list[float] = []  # the timed span's start (0) on ``clock``, then the end of each timed step
    last: float | None = None  # when the previous timed step ended (in this pass or the one before)
    first_pass = True  # the pass running is the trial's first (warm-up when the trial goes past it)

    look = 0  # a screen's next look at its interval, in timed batches (looks grow geometrically)
    over = False  # a look found the trial done: it stays done

    def more(force: bool = False) -> bool:
        nonlocal look, over
        if seen < warmup:
            return True
        timed = len(marks) - 1
        spent = time.perf_counter() - t_start
        if over or (end.stable is not None and not force and timed < look and not end.capped(marks, spent)):
            return not over
        look = timed + max(1, timed // LOOK_EVERY)
        per_batch = rows / max(1, timed)  # rows per timed batch so far: ``beat`` in batches/s
        over = end.done(marks, None if beat is None or not rows else beat / per_batch, spent)
        return not over

    while more():
        began = time.perf_counter()  # a later pass's start (its workers, its first reads) is timed
        it = iter(loader)
        in_pass = 0
        while more():
            asked = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            ready = time.perf_counter()
            in_pass += 1
            seen += 1
            size = size or nbytes(batch) // max(1, rows_of(batch))
            busy_step(step_ms)
            done = time.perf_counter()  # the measured span ends with the last step, not the loader's close
            if seen <= warmup:
                continue
            if not marks:
                marks.append(0.0)
            since = last if last is not None else (began if in_pass == 1 and not first_pass else asked)
            clock += done - since
            marks.append(clock)
            last = done
            waited += ready - asked
            rows += rows_of(batch)
        close = getattr(it, "close", None)
        if close is not None:
            close()
        if not in_pass:
            raise RuntimeError("the loader gave no batch: the store is empty or smaller than one batch with drop_last")
        if first_pass and in_pass > 1 and marks and more(force=True):  # the first pass was warm-up: time from the next
            rows, waited, clock, marks, last = 0, 0.0, 0.0, [], None
        first_pass = False
    elapsed = clock if clock > 0 else time.perf_counter() - t_start
    found = interval(marks) if end.stable is not None else None
    per_batch = rows / max(1, len(marks) - 1)
    return Trial(
        setting,
        rows / elapsed,
        waited / elapsed,
        time.perf_counter() - t_start,
        rows=rows,
        batch_bytes=size * rows // max(1, len(marks) - 1),
        spread=None if found is None else found[1],
        raced=bool(beat is not None and rows and end.behind(marks, beat / per_batch)),
    )
