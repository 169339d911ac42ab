"""The online tuner's policy, driven by injected window figures and a fake clock (no timing)."""

import math
import os
import time

import pytest

from stoker.pipeline.autotune import (
    BLOCK_S,
    FORGET_S,
    MIN_BATCHES,
    SEARCH_WINDOW_S,
    AutoTuner,
    Bounds,
    Measure,
)


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def tuner(workers=1, prefetch=1, max_workers=4, budget=None, tune_workers=True, tune_prefetch=True, jump_to=None):
    clock = Clock()
    bounds = Bounds(max_workers, 8, budget, jump_to)
    t = AutoTuner(workers, prefetch, tune_workers, tune_prefetch, bounds, clock=clock)
    t.begin_pass()
    return t, clock


def window(rate, wait, busy, step_ms=None, ready=0.0):
    """One second's figures: ``rate`` batches, ``wait`` share blocked, workers ``busy``."""
    batches = max(1, round(rate))
    waited = wait * 1.0
    return Measure(1.0, waited, batches, busy, ready)


def verify(t, clock, m):
    """Two windows with the figures ``m`` (a change is judged on the mean of two): the second's decision."""
    clock.t += 1
    assert t.step(m) is None and t._pending is not None  # one window decides nothing
    clock.t += 1
    return t.step(m)


def test_adds_a_worker_while_the_consumer_waits_on_busy_workers_and_keeps_it_when_the_rate_rises():
    t, clock = tuner()
    d = t.step(window(100, 0.5, 0.95))
    assert d.action == "add worker" and (t.workers, t.prefetch) == (2, 1)
    assert (t.knobs.workers, t.knobs.depth) == (2, 2)
    d = verify(t, clock, window(180, 0.3, 0.95))  # rate rose 80 %: kept, and the consumer still waits: another
    assert d.action == "add worker" and t.workers == 3


def test_adds_no_worker_while_the_loaders_processes_fill_the_cores():
    t, clock = tuner(workers=2)
    full = Measure(1.0, 0.5, 100, 0.95, cpu=0.97)  # the consumer waits on busy workers, every core used
    d = t.step(full)
    assert d.action == "deepen" and t.workers == 2  # a depth costs memory only; a worker could only share a core
    assert verify(t, clock, full).action == "undo"
    clock.t += 0.1
    d = t.step(full)
    assert d.action == "hold" and "the cores are full" in d.reason and "cores 97% used" in str(d)
    clock.t += 0.1
    assert t.step(Measure(1.0, 0.5, 100, 0.95, cpu=0.6)).action == "add worker"  # a core free: try one


def test_the_process_trees_cpu_is_counted_with_its_worker_processes():
    import multiprocessing

    from stoker.pipeline.autotune import tree_cpu

    def children() -> float:  # the tree's CPU less this process's own
        return sum(t for pid, t in tree_cpu().items() if pid != os.getpid())

    child = multiprocessing.get_context("fork").Process(target=sum, args=(range(3 * 10**7),))
    child.start()
    seen = 0.0
    while child.is_alive():  # the child's CPU counts while it lives (psutil, a dev dependency)
        seen = max(seen, children())
        time.sleep(0.01)
    child.join()
    assert seen > 0.05


def test_undoes_a_worker_that_did_not_raise_the_rate_and_stops_adding():
    t, clock = tuner(workers=2, max_workers=3)
    assert t.step(window(100, 0.5, 0.95)).action == "add worker"
    d = verify(t, clock, window(101, 0.5, 0.95))  # 1 % faster: not enough
    assert d.action == "undo" and t.workers == 2 and t.knobs.workers == 2
    clock.t += 0.1
    d = t.step(window(100, 0.5, 0.95))  # 3 workers are now a ceiling: deepen instead
    assert d.action == "deepen" and (t.workers, t.prefetch) == (2, 2)
    assert verify(t, clock, window(90, 0.5, 0.95)).action == "undo"
    clock.t += 0.1
    d = t.step(window(100, 0.5, 0.95))
    assert d.action == "hold" and "did not raise the rate" in d.reason
    clock.t += 0.1
    assert t.step(window(100, 0.5, 0.95)) is None  # the same hold is said once


def test_ceilings_expire():
    t, clock = tuner(workers=2, tune_prefetch=False, max_workers=3)
    t.step(window(100, 0.5, 0.95))
    assert verify(t, clock, window(90, 0.5, 0.95)).action == "undo"
    clock.t += 0.1
    assert t.step(window(100, 0.5, 0.95)).action == "hold"
    clock.t += BLOCK_S
    assert t.step(window(100, 0.5, 0.95)).action == "add worker"  # the first failure blocks for BLOCK_S
    assert verify(t, clock, window(90, 0.5, 0.95)).action == "undo"
    clock.t += BLOCK_S
    assert t.step(window(100, 0.5, 0.95)).action == "hold"  # the second failure of 3 workers: twice as long
    clock.t += BLOCK_S
    assert t.step(window(100, 0.5, 0.95)).action == "add worker"
    assert verify(t, clock, window(90, 0.5, 0.95)).action == "undo"
    clock.t += FORGET_S
    assert t.step(window(100, 0.5, 0.95)).action == "add worker"  # never blocked longer than FORGET_S


def test_a_jump_that_does_not_pay_is_undone_and_smaller_ones_are_tried_below_it():
    t, clock = tuner(workers=1, max_workers=4, jump_to=4)
    d = t.step(window(100, 0.9, 0.95))  # no step to speak of: the estimate is the most workers
    assert d.action == "add worker" and t.workers == 4 and "estimate 4 workers" in d.reason
    assert verify(t, clock, window(80, 0.9, 0.95)).action == "undo" and t.workers == 1  # slower (a lock, a GIL)
    clock.t += 0.1
    d = t.step(window(100, 0.9, 0.95))
    assert d.action == "add worker" and t.workers == 3  # below the ceiling of 4
    d = verify(t, clock, window(130, 0.9, 0.95))  # 30 % faster than 1 worker: kept (and, at the ceiling, deeper)
    assert d.action == "deepen" and t.workers == 3


def test_a_kept_setting_is_judged_on_its_mean_rate_not_one_noisy_window():
    t, clock = tuner(workers=2, max_workers=4, jump_to=3)
    for rate in (100, 110, 90, 100):  # 2 workers: 100 batches/s on average, noisy
        t._last_wait = 0.0
        t.step(window(rate, 0.04, 0.95))  # below the wait that makes it add
        clock.t += 1
    d = t.step(window(100, 0.5, 0.95))
    assert d.action == "add worker" and t.workers == 3
    clock.t += 1
    assert t.step(window(90, 0.5, 0.95)) is None and t._pending is not None  # -10 %: one window is not enough
    clock.t += 1
    d = t.step(window(130, 0.5, 0.95))  # +10 % over both windows: kept, and the consumer still waits
    assert d.action == "add worker" and t.workers == 4


def test_the_first_windows_and_a_change_to_verify_are_short():
    t, clock = tuner()
    assert t.searching()  # nothing measured yet
    t.step(window(100, 0.5, 0.95))
    assert t.searching()  # a change to verify
    verify(t, clock, window(200, 0.01, 0.5, ready=2))  # kept, and the consumer does not wait: settled
    assert not t.searching()


def test_deeper_prefetch_follows_the_spread_of_task_times():
    t, _ = tuner(workers=2)
    d = t.step(Measure(1.0, 0.4, 100, 0.5, 0.0, 50, jitter=2.0))  # task times spread: 1 + 2 x 2 = 5 -> 8
    assert d.action == "deepen" and t.prefetch == 8


def test_deepens_when_workers_idle_between_tasks():
    t, _ = tuner(workers=2)
    d = t.step(window(100, 0.4, 0.5))  # waits, but the workers are half idle: too few tasks in flight
    assert d.action == "deepen" and (t.workers, t.prefetch) == (2, 2) and t.knobs.depth == 4


def test_retires_idle_workers_when_the_consumer_does_not_wait_and_puts_them_back_if_it_then_waits():
    t, clock = tuner(workers=4)
    d = t.step(window(50, 0.0, 0.2, ready=3))  # 4 x 20 % busy: 2 workers would be 40 % busy, 1 worker 80 %
    assert d.action == "retire worker" and t.workers == 2
    clock.t += 1
    d = t.step(window(30, 0.3, 0.95))  # the consumer waits now and the rate fell: back to 4
    assert d.action == "undo" and t.workers == 4
    clock.t += 1
    assert t.step(window(50, 0.0, 0.2, ready=3)) is None  # 4 is a floor for a while
    clock.t += FORGET_S
    assert t.step(window(50, 0.0, 0.25, ready=3)).action == "retire worker" and t.workers == 2


def test_does_not_retire_busy_workers_or_below_one():
    t, _ = tuner(workers=2)
    assert t.step(window(50, 0.0, 0.9, ready=2)) is None  # one worker could not do it at <= 60 % busy
    t1, _ = tuner(workers=1)
    assert t1.step(window(50, 0.0, 0.0, ready=2)) is None


def test_a_4x_faster_step_jumps_to_the_workers_it_needs():
    t, clock = tuner(workers=2, max_workers=8)
    # settled: 2 workers feed a 20 ms step
    assert t.step(Measure(1.0, 0.0, 50, 0.6, 2.0)) is None
    # the step gets 4x faster: 5 ms; the consumer now waits 60 % of each 12.5 ms
    clock.t += 1
    d = t.step(Measure(1.0, 0.6, 80, 0.95, 0.0))
    kinds = [x.action for x in t.decisions]
    # 2 workers busy 95 % give 40 % of what the step asks for: ceil(2 x 0.95 / 0.4) = 5 at once
    assert kinds[-2:] == ["step changed", "add worker"] and d.action == "add worker" and t.workers == 5
    assert "estimate 5 workers" in d.reason


def test_a_step_change_spread_over_two_windows_is_one_change():
    t, clock = tuner(workers=2, max_workers=8)
    assert t.step(Measure(1.0, 0.0, 50, 0.6, 2.0)) is None  # a 20 ms step
    clock.t += 1
    t.step(Measure(1.0, 0.4, 75, 0.95, 0.0))  # the change mid-window: 8 ms a batch on average
    clock.t += 1
    t.step(Measure(1.0, 0.5, 100, 0.95, 0.0))  # all 5 ms now: not a second change
    assert [d.action for d in t.decisions].count("step changed") == 1


def test_a_tiny_step_that_doubles_is_not_a_change():
    t, clock = tuner(workers=2)
    t.step(Measure(1.0, 0.99, 20, 0.95, 0.0))  # step 0.5 ms, batches every 50 ms
    clock.t += 1
    t.step(Measure(1.0, 0.98, 20, 0.95, 0.0))  # step 1 ms: 2x, but 1 % of the time between batches
    assert "step changed" not in [d.action for d in t.decisions]


def test_memory_budget_bounds_what_is_added():
    t, _ = tuner(workers=2, prefetch=2, budget=4 * 2**20)
    t.batch_bytes, t.per_chunk = 2**20, 1  # 2 x 2 x 1 MiB in flight now: exactly the budget
    d = t.step(window(100, 0.5, 0.95))
    assert d.action == "hold" and "memory_budget" in d.reason and (t.workers, t.prefetch) == (2, 2)


def test_unknown_batch_size_with_a_budget_adds_nothing():
    t, _ = tuner(workers=2, budget=2**30)
    d = t.step(window(100, 0.5, 0.95))
    assert d.action == "hold" and (t.workers, t.prefetch) == (2, 1)


def test_fixed_knobs_are_not_moved():
    t, _ = tuner(workers=3, tune_workers=False)
    d = t.step(window(100, 0.5, 0.95))
    assert d.action == "deepen" and t.workers == 3
    t2, _ = tuner(prefetch=2, tune_prefetch=False)
    d = t2.step(window(100, 0.5, 0.3))
    assert d.action == "add worker" and t2.prefetch == 2


def test_handed_decides_once_per_window_from_measured_figures():
    t, clock = tuner(jump_to=2)
    timed = t.timed(lambda task: clock.__setattr__("t", clock.t + 0.125) or task)  # a task "takes" 1/8 s
    decisions = []
    for i in range(40):
        timed(i)  # the worker reads (here inline, the fake clock moves)
        decisions.append(t.handed(0.1))  # the consumer waited 100 ms of those 125
    made = [n for n, d in enumerate(decisions) if d is not None]
    # the consumer waits 80 %: the tuner searches, and a window ends after SEARCH_WINDOW_S and MIN_BATCHES
    per_window = max(MIN_BATCHES, math.ceil(SEARCH_WINDOW_S / 0.125))
    assert made[:2] == [per_window - 1, 3 * per_window - 1]
    first = decisions[made[0]]
    assert first.action == "add worker" and first.wait_share == pytest.approx(0.8) and first.busy == pytest.approx(1.0)
    assert first.rate == pytest.approx(8.0) and first.workers == 2  # ceil(1 x 1.0 / 0.2) = 5, at most 2 cores here
    assert decisions[made[1]].action == "undo"  # the same rate with two workers, over two windows


def test_one_idle_worker_that_nothing_helps_tries_reading_inline_and_keeps_it_if_faster():
    t, clock = tuner(workers=1, prefetch=8, max_workers=1)  # no deeper prefetch, no second worker
    d = t.step(window(100, 0.6, 0.3))
    assert d.action == "inline" and t.workers == 0 and (t.knobs.workers, t.knobs.depth) == (0, 0)
    clock.t += 1
    t.step(window(150, 0.6, 0.9))  # 50 % faster: kept (then a worker is tried again, the consumer still waits)
    assert "undo" not in [x.action for x in t.decisions]


def test_inline_that_is_slower_is_undone_and_not_tried_again_for_a_while():
    t, clock = tuner(workers=1, prefetch=8, max_workers=1)
    assert t.step(window(100, 0.6, 0.3)).action == "inline"
    d = verify(t, clock, window(80, 0.6, 0.9))
    assert d.action == "undo" and t.workers == 1
    clock.t += 1
    assert t.step(window(100, 0.6, 0.3)).action == "hold"


def test_processes_never_go_inline():
    t, _ = tuner(workers=1, prefetch=8, max_workers=1)
    t.for_processes()
    assert t.step(window(100, 0.6, 0.3)).action == "hold"


def test_a_window_spans_short_passes_but_not_a_long_gap_between_them():
    t, clock = tuner()
    for _ in range(5):  # five passes of 0.3 s, 3 batches each: windows go on across them
        t.begin_pass()
        for _ in range(3):
            clock.t += 0.1
            t.handed(0.09)
    assert len(t.decisions) >= 1 and t.decisions[0].action == "deepen"  # (no task timed: workers idle)
    n = len(t.decisions)
    clock.t += 60  # an hour of evaluation between passes is not part of the loop's window
    t.begin_pass()
    for _ in range(3):
        clock.t += 0.1
        t.handed(0.0)
    assert len(t.decisions) == n  # 0.3 s since the new window began: nothing decided yet


def test_inline_is_tried_with_one_busy_worker_too_once_more_workers_and_depth_failed():
    t, clock = tuner(workers=1, prefetch=8, max_workers=1)
    d = t.step(window(100, 0.9, 0.95))  # the one worker is busy, the consumer waits: hand-off overhead?
    assert d.action == "inline" and t.workers == 0


def test_a_change_that_halves_the_consumers_wait_stays_though_the_rate_rose_less_than_5_percent():
    t, clock = tuner(workers=1, tune_workers=False)
    d = t.step(window(100, 0.06, 0.5))  # the consumer waits 6 %: at most 6 % faster to gain
    assert d.action == "deepen" and t.prefetch == 2
    assert verify(t, clock, window(102, 0.02, 0.5)) is None and t._pending is None and t.prefetch == 2  # kept
    clock.t += 1
    assert t.step(window(100, 0.01, 0.5)) is None and t.prefetch == 2


def test_the_estimate_stops_at_the_memory_budget_and_at_a_ceiling():
    t, _ = tuner(workers=1, max_workers=8, jump_to=8, budget=3 * 2**20)
    t.batch_bytes, t.per_chunk = 2**20, 1  # 1 MiB a worker at prefetch 1: 3 fit
    d = t.step(window(100, 0.9, 0.95))  # the estimate is 8 workers (ceil(0.95 / 0.1) = 10, at most 8)
    assert d.action == "add worker" and t.workers == 3
    t2, clock = tuner(workers=1, max_workers=8, jump_to=8)
    t2._ceiling["workers"] = (5, clock.t + 1)  # 5 workers failed a moment ago
    assert t2.step(window(100, 0.9, 0.95)).action == "add worker" and t2.workers == 4


def test_a_slower_step_retires_idle_workers_in_one_decision():
    t, clock = tuner(workers=4, max_workers=8)
    assert t.step(Measure(1.0, 0.0, 100, 0.6, 3.0)) is None  # 4 workers 60 % busy on a 10 ms step
    clock.t += 1
    d = t.step(Measure(1.0, 0.0, 25, 0.15, 3.0))  # the step is 4x slower: 4 x 15 % = 0.6 worker busy
    assert [x.action for x in t.decisions][-2:] == ["step changed", "retire worker"] and d.workers == 1


def test_when_a_second_thread_does_not_pay_reading_inline_is_tried_next():
    t, clock = tuner(workers=1, max_workers=4, jump_to=2)
    assert t.step(window(100, 0.9, 0.8)).action == "add worker" and t.workers == 2
    assert verify(t, clock, window(90, 0.9, 0.8)).action == "undo" and t.workers == 1
    clock.t += 0.1
    d = t.step(window(100, 0.9, 0.8))  # before a deeper prefetch: the hand-off may be what costs
    assert d.action == "inline" and t.workers == 0 and "second worker" in d.reason
    p, _ = tuner(workers=1, max_workers=4, jump_to=2)
    p.for_processes()
    p._ceiling["workers"] = (2, 1e9)
    assert p.step(window(100, 0.9, 0.8)).action == "deepen"  # processes are never read inline


def test_the_wait_a_change_is_judged_against_is_the_settings_mean_not_the_window_that_made_it():
    t, clock = tuner(workers=2, tune_prefetch=False)
    for _ in range(3):
        assert t.step(window(100, 0.04, 0.9)) is None  # waits 4 %: nothing to do
        clock.t += 1
    assert t.step(window(100, 0.10, 0.9)).action == "add worker"  # one window at 10 %: the mean is 5.5 %
    d = verify(t, clock, window(101, 0.04, 0.9))  # 4 % again: not half the mean, and no faster
    assert d.action == "undo" and t.workers == 2


def test_a_deeper_prefetch_stays_when_the_wait_fell_and_the_rate_held():
    # the consumer waits 12 % of a step-bound window: a deeper prefetch can raise the rate by 12 % at most,
    # within the noise of two windows; the wait falling (not halving) with the rate held keeps it
    t, clock = tuner(workers=3, max_workers=3)
    t.for_processes()
    assert t.step(window(110, 0.12, 1.0)).action == "deepen" and t.prefetch == 2
    d = verify(t, clock, window(108, 0.08, 1.0))  # rate -2 % (noise), wait 12 -> 8 %: kept
    assert d is not None and d.action == "deepen" and t.prefetch == 4  # and the consumer still waits: deeper
    u, clock = tuner(workers=3, max_workers=3)
    u.for_processes()
    assert u.step(window(110, 0.12, 1.0)).action == "deepen"
    d = verify(u, clock, window(108, 0.13, 1.0))  # the wait did not fall: undone
    assert d.action == "undo" and u.prefetch == 1


def test_when_more_workers_and_depth_fail_on_idle_workers_one_fewer_is_tried_then_inline():
    # small cheap batches: 2 worker threads half idle, the consumer waits on the hand-off; a third worker
    # and a deeper prefetch did not pay, so the way to a faster loader is fewer threads (down to inline)
    t, clock = tuner(workers=2, prefetch=8, max_workers=4, jump_to=2)
    t._ceiling["workers"] = (3, clock.t + 1.0)
    d = t.step(window(100, 0.9, 0.6))
    assert d.action == "drop worker" and t.workers == 1 and "not the bottleneck" in d.reason
    assert verify(t, clock, window(100, 0.9, 0.8)).action == "inline"  # as fast with one: 2 is a ceiling now
    assert t.workers == 0


def test_one_fewer_worker_that_lowers_the_rate_is_undone_and_floored():
    t, clock = tuner(workers=2, prefetch=8, max_workers=2, jump_to=2)
    assert t.step(window(100, 0.9, 0.6)).action == "drop worker"
    d = verify(t, clock, window(80, 0.9, 0.9))
    assert d.action == "undo" and t.workers == 2
    clock.t += 0.1
    assert t.step(window(100, 0.9, 0.6)).action == "hold"  # 2 is a floor for a while
    clock.t += FORGET_S
    assert t.step(window(100, 0.9, 0.6)).action == "drop worker"


def test_busy_workers_up_to_the_cores_are_not_dropped():
    t, _ = tuner(workers=2, prefetch=8, max_workers=2, jump_to=2)
    assert t.step(window(100, 0.9, 0.95)).action == "hold"  # the bottleneck: one fewer would be slower
    p, _ = tuner(workers=3, prefetch=8, max_workers=3, jump_to=2)
    assert p.step(window(100, 0.9, 0.95)).action == "drop worker"  # more busy workers than cores: maybe not


def test_a_windows_cpu_share_counts_new_processes_and_never_goes_negative_when_one_ends():
    from stoker.pipeline.tuning import Window

    w = Window(0.0, {1: 5.0, 2: 3.0})  # pid 2 (a worker of the last pass) ends; pid 3 starts
    m = w.measure(2.0, 1, True, {1: 5.5, 3: 0.3}, cores=2)
    assert m.cpu == pytest.approx((0.5 + 0.3) / (2.0 * 2))
    assert Window(0.0).measure(1.0, 1, False, {1: 1.0}).cpu is None  # nothing at the start: unknown
