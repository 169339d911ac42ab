"""Online tuning (``num_workers="auto"``, ``prefetch_factor="auto"``): worker threads and prefetch
depth sized while the loader runs, from what it measures (``docs/autotune.md``).

The controller runs on the consumer's side, no thread of its own: each batch handed out is counted
(:meth:`AutoTuner.handed`), each worker task is timed (:meth:`AutoTuner.timed`), and at the end of a
*window* (:data:`WINDOW_S` seconds, :data:`SEARCH_WINDOW_S` while it searches, :data:`MIN_BATCHES`
batches at least) the window's :class:`Measure` goes to the policy (``pipeline/autotune_policy.py``).
A change is applied to the running map's :class:`~stoker.pipeline.threads.Knobs` from the next batch
on (the order of the batches never changes) and recorded as a :class:`Decision`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from stoker.pipeline.autotune_policy import BLOCK_S, FORGET_S, Policy
from stoker.pipeline.schedule import TUNER, Schedule, usable_cores
from stoker.pipeline.threads import Knobs
from stoker.pipeline.tuning import MAX_PREFETCH, Bounds, Decision, Measure, TuneReport, Window, nbytes

WINDOW_S = 1.0  # a decision at most once per this many seconds once settled...
SEARCH_WINDOW_S = 0.3  # ...or this many while searching (a change to verify, or the consumer waits)
MIN_BATCHES = 4  # ...and this many batches handed out
WAIT_SEARCH = 0.2  # the consumer waits a lot: shorter windows
MAX_WORKERS_PER_CORE = 2


class AutoTuner(Policy):
    """The online controller of one loader's worker threads and prefetch depth: measures, decides
    (:class:`~stoker.pipeline.autotune_policy.Policy`), applies and records.

    Args:
        workers: the start (and, when ``tune_workers`` is False, fixed) worker count.
        prefetch: the start (and, when ``tune_prefetch`` is False, fixed) chunks in flight per worker.
        tune_workers, tune_prefetch: which knobs it moves.
        bounds: the :class:`Bounds` it moves within.
        clock: seconds, monotonic (tests pass a fake one).
        on_decision: called with each :class:`Decision` (the loader tells its observers).
        cpu: CPU seconds used so far by the loader's process tree (:func:`tree_cpu`), or None where
            not measured; with ``cores``, the usable cores, it gives each window's :attr:`Measure.cpu`.
    """

    def __init__(
        self,
        workers: int,
        prefetch: int,
        tune_workers: bool,
        tune_prefetch: bool,
        bounds: Bounds,
        clock: Callable[[], float] = time.perf_counter,
        on_decision: Callable[[Decision], None] | None = None,
        cpu: Callable[[], dict[int, float]] | None = None,
        cores: int = 1,
    ) -> None:
        super().__init__(workers, prefetch, tune_workers, tune_prefetch, bounds)
        self.clock = clock
        self.on_decision = on_decision
        self.cpu, self.cores = cpu, cores
        self.decisions: list[Decision] = []
        self.knobs = Knobs(self.workers, self.workers * self.prefetch)
        self._began: float | None = None  # the first pass's start
        self._window = self._new_window()
        self._last = self._window.start  # when the consumer got its last batch

    # -- measuring ------------------------------------------------------------------------------
    def begin_pass(self, per_chunk: int = 1, batch_bytes: float | None = None) -> Knobs:
        """A pass begins (its chunks hold ``per_chunk`` batches at most, of ``batch_bytes`` each when the
        source knows); returns the knobs its map runs with. The window goes on across passes (short
        epochs still make whole windows, the restart counted as the consumer's wait), unless the last
        batch is older than a window: then a fresh one begins (the time between passes is not the loop's)."""
        self.per_chunk, self.batch_bytes = per_chunk, batch_bytes if batch_bytes is not None else self.batch_bytes
        if self._began is None or self.clock() - self._last > WINDOW_S:
            self._window = self._new_window()  # a change still to check is checked in the new window
        if self._began is None:
            self._began = self.clock()
        self._set(self.workers, self.prefetch)
        return self.knobs

    def timed(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``fn`` with each call's time added to the workers' busy time (runs in worker threads)."""
        clock = self.clock

        def measured(task: Any) -> Any:
            t0 = clock()
            try:
                return fn(task)
            finally:
                self._window.task(clock() - t0)

        return measured

    def searching(self) -> bool:
        """Whether the next window is a short one: a change to verify, or the consumer waited a lot."""
        return self._pending is not None or self._last_wait > WAIT_SEARCH

    def handed(self, waited: float, batch: Any = None) -> Decision | None:
        """The consumer got a batch after waiting ``waited`` seconds (call from its thread). At the
        end of a window, decides and returns the decision (None when nothing changed)."""
        window, knobs = self._window, self.knobs
        threads = max(1, knobs.threads or self.workers)
        window.batch(waited, knobs.ready, min(1.0, max(0, knobs.in_flight - knobs.ready) / threads))
        if self.batch_bytes is None and batch is not None:
            self.batch_bytes = float(nbytes(batch)) or None
        now = self._last = self.clock()
        length = min(WINDOW_S, SEARCH_WINDOW_S) if self.searching() else WINDOW_S
        if now - window.start < length or window.batches < MIN_BATCHES:
            return None
        used = None if self.cpu is None else self.cpu()  # one read: this window's end, the next one's start
        self._window = Window(now, used)
        return self.step(window.measure(now, threads, self.processes, used, self.cores))

    def _new_window(self) -> Window:
        return Window(self.clock(), None if self.cpu is None else self.cpu())

    def step(self, m: Measure) -> Decision | None:
        """Decide on one window's figures ``m`` now (the policy's :meth:`~Policy.decide` at the clock's time)."""
        return self.decide(m, self.clock())

    def _set(self, workers: int, prefetch: int) -> None:
        super()._set(workers, prefetch)
        self.knobs.workers, self.knobs.depth = workers, workers * prefetch

    def _record(self, m: Measure, action: str, reason: str) -> Decision:
        now = time.perf_counter()
        began = self._began if self._began is not None else self.clock()
        if m.wall > 0:
            reason = f"{reason} ({m.figures()})"
        d = Decision(
            now, self.clock() - began, action, self.workers, self.prefetch, m.wait_share, m.rate, m.busy, reason
        )
        self.decisions.append(d)
        if self.on_decision is not None:
            self.on_decision(d)
        return d

    def report(self) -> TuneReport:
        """The settings now and every decision so far (the loader adds its source's report as ``inner``)."""
        return TuneReport(self.workers, self.prefetch, tuple(self.decisions), None)

    def fixed(self, reason: str) -> Decision:
        """Record a setting picked once (not tuned online), e.g. for worker processes."""
        return self._record(Measure(0.0, 0.0, 0, 0.0), "fixed", reason)

    def steers(self, workers: int) -> bool:
        """Whether it runs in a pass at ``workers`` workers: with workers, or when it may add some."""
        return workers > 0 or self.tune_workers

    def applied(self, schedule: Schedule) -> Schedule:
        """``schedule`` with the settings this tuner moves set to where it has them now."""
        changes: dict[str, Any] = {}
        if self.tune_workers:
            changes["workers"] = self.workers
        if self.tune_prefetch:
            changes["prefetch"] = self.prefetch
        return schedule.with_(TUNER, **changes) if changes else schedule

    def for_processes(self) -> int:
        """The workers are processes from now on: their tasks are not timed here (they run in other
        processes), so their busy share is the share of workers with a task outstanding when the
        consumer asks. Returns the worker count."""
        self.processes = True
        if self.workers == 0:  # a process pool has one worker at least
            self._set(1, self.prefetch)
        return self.workers


def tree_cpu() -> dict[int, float]:
    """CPU seconds (user + system) used so far by this process (all its threads) and, where psutil is
    installed (``stoker[doctor]``), by each of its live children (worker processes), by pid
    (:meth:`~stoker.pipeline.tuning.Window.measure` takes the difference of two). A child that ended,
    or one not seen without psutil, takes its time with it: the figure errs low (toward adding workers)."""
    seconds = {os.getpid(): time.process_time()}
    try:
        import psutil
    except ImportError:
        return seconds
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return seconds
    for child in children:
        try:
            seconds[child.pid] = sum(child.cpu_times()[:2])
        except psutil.Error:
            continue
    return seconds


def tuner_for(config: Any, schedule: Schedule) -> AutoTuner | None:
    """The tuner of a :class:`stoker.LoaderConfig`'s ``"auto"`` settings, None when it has none.

    It starts from ``schedule`` (``pipeline/schedule.py``: the default workers and prefetch where they
    are ``"auto"``, so that tuning starts where a loader without it reads; the other settings as given
    or defaulted)."""
    auto_workers, auto_prefetch = config.num_workers == "auto", config.prefetch_factor == "auto"
    if not (auto_workers or auto_prefetch):
        return None
    workers, cores = schedule.workers, usable_cores()
    most = cores if schedule.engine == "processes" else MAX_WORKERS_PER_CORE * cores
    tuner = AutoTuner(
        workers,
        schedule.prefetch,
        auto_workers,
        auto_prefetch,
        Bounds(most, memory_budget=config.memory_budget, jump_to=cores),
        cpu=tree_cpu,
        cores=cores,
    )
    if workers == 0 and not auto_workers:
        tuner.tune_prefetch = False
        tuner.fixed("prefetch_factor='auto' has nothing to tune: the batches are read in the consumer's thread")
    return tuner


__all__ = [
    "BLOCK_S",
    "FORGET_S",
    "MAX_PREFETCH",
    "AutoTuner",
    "Bounds",
    "Decision",
    "Measure",
    "TuneReport",
    "nbytes",
    "tree_cpu",
    "tuner_for",
]
