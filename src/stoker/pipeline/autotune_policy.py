"""The online tuner's decision policy (``pipeline/autotune.py`` measures and applies): one window's
figures (a :class:`~stoker.pipeline.tuning.Measure`) and the clock in, at most one change of the
worker count or the prefetch depth out, with what it learned kept between windows.

:meth:`Policy.decide` applies, once per window: forget what was learned when the consumer's step
changed; verify the last change on :data:`VERIFY_WINDOWS` windows (kept when the rate rose
:data:`GAIN` or the wait fell, else undone and its value blocked for a while); while the consumer
waits, add workers (to an estimate) or deepen the prefetch, or read inline, or try one worker fewer;
while it does not, retire idle workers. The rules with their thresholds: ``docs/autotune.md``.
"""

from __future__ import annotations

import math

from stoker.pipeline.tuning import Bounds, Decision, Measure, Trial

BLOCK_S = 2.5  # a ceiling or floor lasts this many seconds, doubled each time the same value fails again...
FORGET_S = 20.0  # ...up to this many
WAIT_HIGH = 0.05  # the consumer waits: more than this share of the window blocked on batches
WAIT_LOW = 0.02  # the consumer does not wait: less than this share
BUSY_HIGH = 0.75  # the workers are the bottleneck: busy at least this share of their time
BUSY_RETIRE = 0.6  # retire workers down to the count that would be at most this busy
GAIN = 0.05  # a change stays if the rate rose by at least this share (and is undone if it fell by it)
STEP_CHANGE = 1.5  # the consumer's step changed: its time per batch moved by this factor...
STEP_SHARE = 0.25  # ...and by this share of the time between batches
VERIFY_WINDOWS = 2  # a change is judged on the mean of this many windows
CPU_FULL = 0.9  # the loader's process tree used this share of the usable cores: no worker is added
ADDS = ("add worker", "deepen", "inline")  # changes kept only when the rate rises
DROP = "drop worker"  # one worker fewer while the consumer waits: kept unless the rate falls


class Policy:
    """What the online tuner decides from each window's figures, and what it learned so far.

    Args:
        workers: the start (and, when ``tune_workers`` is False, fixed) worker count.
        prefetch: the start (and, when ``tune_prefetch`` is False, fixed) chunks in flight per worker.
        tune_workers, tune_prefetch: which knobs it moves.
        bounds: the :class:`Bounds` it moves within.

    A subclass applies the settings (:meth:`_set`) and records the decisions (:meth:`_record`).
    """

    def __init__(self, workers: int, prefetch: int, tune_workers: bool, tune_prefetch: bool, bounds: Bounds) -> None:
        self.workers, self.prefetch = max(0, workers), max(1, prefetch)
        self.tune_workers, self.tune_prefetch = tune_workers, tune_prefetch
        self.bounds = bounds
        self.processes = False  # workers are processes: never read inline
        self.batch_bytes: float | None = None  # bytes of one batch (the source's, or measured)
        self.per_chunk = 1  # batches per worker task at most
        self._last_wait = 1.0  # the last window's wait share (nothing measured yet: search)
        self._pending: Trial | None = None  # a change to verify
        self._rates: dict[tuple[int, int], tuple[float, float, int]] = {}  # setting -> (rate, wait, windows)
        self._ceiling: dict[str, tuple[int, float]] = {}  # knob -> (value not to reach, until when)
        self._floor: tuple[int, float] | None = None  # workers not to retire below, until when
        self._strikes: dict[tuple[str, int], int] = {}  # (knob, value) -> times it failed
        self._step_ref: float | None = None  # the consumer's step the settings were found for
        self._step_new = False  # the step changed in the last window: the next one sets the reference
        self._held = ""

    # -- applying and recording (the subclass's) ----------------------------------------------------
    def _set(self, workers: int, prefetch: int) -> None:
        self.workers, self.prefetch = workers, prefetch

    def _record(self, m: Measure, action: str, reason: str) -> Decision:
        raise NotImplementedError

    # -- bounds -------------------------------------------------------------------------------------
    def _fits(self, workers: int, prefetch: int) -> bool:
        """Whether the batches in flight with these settings fit ``memory_budget`` (not while a batch's size is unknown)."""
        budget = self.bounds.memory_budget
        if budget is None:
            return True
        return self.batch_bytes is not None and workers * prefetch * self.per_chunk * self.batch_bytes <= budget

    def _blocked(self, knob: str, value: int, now: float) -> bool:
        ceiling = self._ceiling.get(knob)
        return ceiling is not None and now < ceiling[1] and value >= ceiling[0]

    def _floored(self, workers: int, now: float) -> bool:
        """Whether ``workers`` is below a floor still in force."""
        floor = self._floor
        return floor is not None and now < floor[1] and workers < floor[0]

    def _until(self, knob: str, value: int, now: float) -> float:
        """Until when a value that failed stays blocked: :data:`BLOCK_S`, doubled for each earlier failure
        of the same value, :data:`FORGET_S` at most (a noisy window does not block a good value for long)."""
        strikes = self._strikes.get((knob, value), 0)
        self._strikes[(knob, value)] = strikes + 1
        return now + min(FORGET_S, BLOCK_S * 2**strikes)

    def _can_add(self, m: Measure, now: float) -> str | None:
        """Why a worker cannot be added, or None when it can."""
        if not self.tune_workers:
            return "num_workers is fixed"
        if m.cpu is not None and m.cpu >= CPU_FULL:
            return "the cores are full (this loader's processes use them all)"  # the share: in the figures
        n = self.workers + 1
        if n > self.bounds.max_workers:
            return f"at the most workers ({self.bounds.max_workers})"
        if self._blocked("workers", n, now):
            return f"{n} workers did not raise the rate"
        if not self._fits(n, self.prefetch):
            return f"{n} workers would pass memory_budget={self.bounds.memory_budget}"
        return None

    def _estimate(self, m: Measure, now: float) -> int:
        """The workers the consumer's step needs (rule 3), one more at least, within the bounds, below a
        ceiling and within the memory budget (call when one more can be added)."""
        n = self.workers
        want = n * m.busy / max(1e-3, 1.0 - m.wait_share)
        jump = self.bounds.jump_to or self.bounds.max_workers
        target = max(n + 1, min(math.ceil(want - 1e-6), max(jump, n + 1), self.bounds.max_workers))
        while target > n + 1 and (self._blocked("workers", target, now) or not self._fits(target, self.prefetch)):
            target -= 1
        return target

    def _can_deepen(self, now: float) -> str | None:
        if not self.tune_prefetch:
            return "prefetch_factor is fixed"
        if self.workers == 0:
            return "the batches are read in the consumer's thread"
        p = min(self.bounds.max_prefetch, 2 * self.prefetch)
        if p == self.prefetch:
            return f"at the deepest prefetch ({self.bounds.max_prefetch})"
        if self._blocked("prefetch", p, now):
            return f"prefetch {p} did not raise the rate"
        if not self._fits(self.workers, p):
            return f"prefetch {p} would pass memory_budget={self.bounds.memory_budget}"
        return None

    def _deeper(self, m: Measure, now: float) -> int:
        """The next depth (call when doubling is allowed): twice this one, or ``1 + 2 × jitter`` rounded up
        to a power of two when the task times spread more, within the bounds, a ceiling and the budget."""
        p = 2 * self.prefetch
        while p < min(self.bounds.max_prefetch, 1 + 2 * m.jitter):
            p *= 2
        p = min(p, self.bounds.max_prefetch)
        while p > 2 * self.prefetch and (self._blocked("prefetch", p, now) or not self._fits(self.workers, p)):
            p //= 2
        return p

    def _remember(self, m: Measure) -> None:
        """Add the window's rate to the mean of the setting it ran with."""
        key = (self.workers, self.prefetch)
        rate, wait, n = self._rates.get(key, (0.0, 0.0, 0))
        n = min(n, 3)  # the last few windows weigh most (the load on the machine drifts)
        self._rates[key] = ((rate * n + m.rate) / (n + 1), (wait * n + m.wait_share) / (n + 1), n + 1)

    # -- the policy ---------------------------------------------------------------------------------
    def decide(self, m: Measure, now: float) -> Decision | None:
        """Apply the policy (module docstring) to one window's figures ``m`` at ``now``; the decision, if any."""
        self._last_wait = m.wait_share
        if self._step_ref is None or self._step_new:  # (the window of a change holds both steps)
            self._step_ref, self._step_new = m.step, False
        elif self._step_changed(m):
            before = self._step_ref
            self._step_ref, self._step_new = m.step, True
            self._ceiling.clear()
            self._strikes.clear()
            self._rates.clear()
            self._floor = None
            self._pending = None
            self._record(
                m, "step changed", f"the consumer's step went from {before * 1e3:.1f} to {m.step * 1e3:.1f} ms"
            )
        self._remember(m)
        pending, self._pending = self._pending, None
        if pending is not None:
            undone = self._check(pending, m, now)
            if undone is not None or self._pending is not None:
                return undone
        if m.wait_share > WAIT_HIGH:
            return self._more(m, now)
        if m.wait_share < WAIT_LOW and self.tune_workers and self.workers > 1:
            return self._fewer(m, now)
        return None

    def _step_changed(self, m: Measure) -> bool:
        ref = self._step_ref
        if ref is None or m.step <= 0 or ref <= 0:
            return False
        return max(m.step / ref, ref / m.step) >= STEP_CHANGE and abs(m.step - ref) >= STEP_SHARE * m.period

    def _check(self, trial: Trial, m: Measure, now: float) -> Decision | None:
        """Verify the change ``trial`` on this window: keep it (None), undo it (the decision), or wait
        for one more window when the rate is within :data:`GAIN` of the mean before it."""
        if trial.action in ADDS or trial.action == DROP:
            trial.rates.append(m.rate)
            trial.waits.append(m.wait_share)
            rate, waited = sum(trial.rates) / len(trial.rates), sum(trial.waits) / len(trial.waits)
            if len(trial.rates) < VERIFY_WINDOWS:
                self._pending = trial  # the next window decides, on the mean of both
                return None
            if trial.action == DROP:
                if rate >= trial.before * (1 - GAIN):  # as fast with fewer: the count dropped from is a ceiling
                    self._ceiling["workers"] = (trial.workers, self._until("workers", trial.workers, now))
                    return None
                self._floor = (trial.workers, self._until("floor", trial.workers, now))
                self._set(trial.workers, trial.prefetch)
                return self._record(
                    m, "undo", f"{DROP} lowered the rate by {GAIN:.0%} or more ({trial.before:.1f} -> {rate:.1f})"
                )
            less_wait = waited <= trial.waited / 2 and trial.waited - waited >= WAIT_LOW
            if trial.action == "deepen":  # results queued ahead cost memory only (within the bounds and budget)
                less_wait = waited < trial.waited
            if rate >= trial.before * (1 + GAIN) or (less_wait and rate > trial.before * (1 - GAIN)):
                return None  # faster, or the consumer's wait halved (lower, for a depth) without a slower rate
            if trial.action == "inline":
                self._floor = (trial.workers, self._until("floor", trial.workers, now))  # not inline for a while
            else:
                knob, value = ("workers", self.workers) if trial.action == "add worker" else ("prefetch", self.prefetch)
                self._ceiling[knob] = (value, self._until(knob, value, now))
            self._set(trial.workers, trial.prefetch)
            return self._record(
                m,
                "undo",
                f"{trial.action} did not raise the rate by {GAIN:.0%} ({trial.before:.1f} -> {rate:.1f} batches/s)",
            )
        if trial.action == "retire worker" and m.wait_share > WAIT_HIGH and m.rate < trial.before * (1 - GAIN):
            self._floor = (trial.workers, self._until("floor", trial.workers, now))
            self._set(trial.workers, trial.prefetch)
            return self._record(
                m, "undo", f"the consumer waited after a worker retired ({trial.before:.1f} -> {m.rate:.1f})"
            )
        return None

    def _more(self, m: Measure, now: float) -> Decision | None:
        bottleneck = m.busy >= BUSY_HIGH
        add, deepen = self._can_add(m, now), self._can_deepen(now)
        inline = self.workers == 1 and self.tune_workers and not self.processes and not self._floored(0, now)
        if inline and self._blocked("workers", 2, now):  # a second thread did not pay: the hand-off may not
            return self._change(m, "inline", 0, self.prefetch, "a second worker did not help")
        order = ("add worker", "deepen") if bottleneck else ("deepen", "add worker")
        for action in order:
            if action == "add worker" and add is None:
                n = self._estimate(m, now)
                why = f"estimate {n} workers" if n > self.workers + 1 else ""
                why = ", ".join(x for x in ("workers busy" if bottleneck else "", why) if x)
                return self._change(m, action, n, self.prefetch, why)
            if action == "deepen" and deepen is None:
                p = self._deeper(m, now)
                return self._change(m, action, self.workers, p, "workers idle between tasks" if not bottleneck else "")
        if inline:  # one worker thread left, and neither a second one nor a deeper prefetch can be tried
            return self._change(m, "inline", 0, self.prefetch, "neither a second worker nor a deeper prefetch helped")
        cores = self.bounds.jump_to or self.bounds.max_workers
        if (
            self.tune_workers
            and self.workers > 1
            and (not bottleneck or self.workers > cores)
            and not self._floored(self.workers - 1, now)
        ):
            why = "neither more workers nor a deeper prefetch helped, and the workers are not the bottleneck"
            return self._change(m, DROP, self.workers - 1, self.prefetch, why)
        reason = f"the consumer waits, but: {'; '.join(x for x in (add, deepen) if x)}"
        if reason != self._held:
            self._held = reason
            return self._record(m, "hold", reason)
        return None

    def _fewer(self, m: Measure, now: float) -> Decision | None:
        n = max(1, math.ceil(m.busy * self.workers / BUSY_RETIRE - 1e-6))
        floor = self._floor
        if floor is not None and now < floor[1]:
            n = max(n, floor[0])
        if n >= self.workers or m.ready < 1:
            return None
        return self._change(m, "retire worker", n, self.prefetch, "workers idle and the consumer does not wait")

    def _change(self, m: Measure, action: str, workers: int, prefetch: int, why: str) -> Decision:
        rate, wait, _ = self._rates.get((self.workers, self.prefetch), (m.rate, m.wait_share, 1))
        self._pending = Trial(action, rate, wait, self.workers, self.prefetch)  # the means: not
        # the window that made the change alone (it was picked for its wait, which the next windows lower by chance)
        self._held = ""
        self._set(workers, prefetch)
        reason = f"the consumer waited {m.wait_share:.0%}" if m.wait_share > WAIT_HIGH else f"{why}"
        if why and m.wait_share > WAIT_HIGH:
            reason += f", {why}"
        return self._record(m, action, reason)


__all__ = [
    "ADDS",
    "BLOCK_S",
    "BUSY_HIGH",
    "BUSY_RETIRE",
    "CPU_FULL",
    "DROP",
    "FORGET_S",
    "GAIN",
    "STEP_CHANGE",
    "STEP_SHARE",
    "VERIFY_WINDOWS",
    "WAIT_HIGH",
    "WAIT_LOW",
    "Policy",
]
