"""When a trial ends (tune/trial.py ``Ending``): enough batches, then a rate known within its
tolerance (a confidence interval over batch means), clearly below the rate to beat, or the cap."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.tune.trial import Ending, interval, settled


def marks(gaps):
    out = [0.0]
    for g in gaps:
        out.append(out[-1] + g)
    return out


def test_a_steady_rate_is_settled_and_a_changing_one_is_not():
    assert settled(marks([0.01] * 9), 0.05)
    assert not settled(marks([0.01] * 6 + [0.02] * 3), 0.05)  # the last third is half as fast
    assert not settled(marks([0.01] * 2), 0.05)  # fewer than three batches: no thirds


def test_a_screening_trial_ends_when_stable_after_its_minimums_or_at_its_cap():
    end = Ending(batches=6, min_seconds=0.05, stable=0.05, max_seconds=1.0)
    assert not end.done(marks([0.01] * 5))  # too few batches
    assert not end.done(marks([0.005] * 6))  # stable, but 0.03 s < min_seconds
    assert end.done(marks([0.01] * 6))
    noisy = [0.01, 0.05] * 10
    assert not end.done(marks(noisy[:-2] + [0.2, 0.2]))
    assert end.done(marks([0.01, 0.3] * 4))  # never stable, but past max_seconds


def test_a_full_trial_ignores_stability():
    end = Ending(batches=3, min_seconds=0.5)
    assert not end.done(marks([0.01] * 9))
    assert end.done(marks([0.1] * 5 + [0.4, 0.01]))


def test_a_noisy_but_flat_rate_narrows_its_interval_and_a_drifting_one_does_not():
    rng = np.random.default_rng(0)
    flat = list(rng.uniform(0.005, 0.015, size=400))  # +-50 % per batch around a flat mean
    assert not settled(marks(flat[:8]), 0.05)  # a few batches: too wide to tell
    assert settled(marks(flat), 0.05)  # many: the interval of the mean interval is narrow
    rate, half = interval(marks(flat))
    assert rate == pytest.approx(100.0, rel=0.05) and 0 < half < 0.05
    drifting = [0.01] * 200 + [0.02] * 200  # the loader halves its rate half-way
    assert not settled(marks(drifting), 0.05)
    assert interval(marks([0.01] * 3)) is None  # fewer than MIN_BLOCKS batches: no interval


def test_a_screen_clearly_below_the_rate_to_beat_ends_early():
    end = Ending(batches=10, min_seconds=0.15, stable=0.05, max_seconds=5.0)
    slow = marks([0.018, 0.022, 0.018, 0.022, 0.02])  # 50 batches/s, known within about 10 %
    assert not end.done(slow)  # on its own: too few batches and seconds yet
    assert end.done(slow, beat=100.0)  # clearly below 100 batches/s after half of its batches
    assert not end.done(marks([0.02] * 4), beat=100.0)  # before half of its batches: never
    assert not end.done(slow, beat=52.0)  # inside its interval's reach: it goes on
    assert end.done(marks([0.02] * 5), beat=52.0)  # the same rate exactly steady: clearly below
    assert not Ending(batches=10).done(slow, beat=100.0)  # a full trial (no ``stable``) is never cut
    noisy = marks([0.005, 0.035] * 3)  # 50 batches/s but too noisy to be sure it is under 60
    assert not end.done(noisy, beat=60.0)
    fast = marks([0.001] * 20)  # 1000 batches/s, far below 10,000, but over 0.02 s: too short a span
    assert not end.done(fast, beat=10_000.0)
    assert end.done(marks([0.001] * 100), beat=10_000.0)  # 0.1 s: past half of min_seconds


def test_a_bursty_screen_is_not_raced_on_a_dip():
    end = Ending(batches=10, min_seconds=0.0, stable=0.10, max_seconds=5.0)
    bursty = marks(([0.01] * 3 + [0.03] * 3) * 4)  # 50 batches/s in fast and slow runs of three
    rate, half = interval(bursty)
    assert 0.2 < half < 1 and rate / (1 - half) < 100.0  # the interval's top is below the bar, but wide
    assert not end.done(bursty, beat=100.0)  # too wide to drop: it runs on to its cap
    assert end.done(marks([0.02] * 24), beat=100.0)  # a steady slower rate is still dropped


def test_a_screen_looks_at_its_interval_a_few_times_not_after_every_batch(monkeypatch):
    import stoker.tune.trial as trial

    looks = []

    def counted(marks):
        looks.append(len(marks) - 1)
        return interval(marks)

    monkeypatch.setattr(trial, "interval", counted)

    class Ones:
        def __iter__(self):
            for _ in range(100):
                yield {"x": np.zeros(1)}

    done = trial.run_trial(lambda s: Ones(), {}, batches=1000, warmup=1, stable=1e-9, max_seconds=0.3)
    timed = done.rows  # at least 1000 (never stable: it runs to its cap)
    assert done.ok and timed >= 1000 and len(looks) < timed / 10


def test_a_screens_cap_counts_its_build_and_left_out_time_not_only_the_timed_span():
    end = Ending(batches=4, min_seconds=0.05, stable=1e-9, max_seconds=1.0)
    never = marks([0.01, 0.05] * 5)  # never settles at 1e-9; a timed span of 0.3 s
    assert not end.done(never) and not end.done(never, spent=0.9)
    assert end.done(never, spent=1.0)  # the loader's build and a dropped first pass took the rest
    assert not end.done(marks([0.01] * 3), spent=5.0)  # its minimum batches still come first
    assert not end.done(marks([0.01] * 4), spent=5.0)  # and its minimum timed span (0.04 s < 0.05 s)


def test_a_screen_whose_loader_is_slow_to_build_ends_at_its_cap_with_a_shorter_timed_span():
    import time

    from stoker.tune.trial import run_trial

    class Drifting:  # each batch slower than the last: never settles, so only the cap ends it
        def __iter__(self):
            for i in range(10_000):
                time.sleep(0.001 * (1 + i / 20))
                yield {"x": np.zeros(1)}

    def make(setting):
        time.sleep(0.6)  # a slow build (a worker pool's start): 0.6 s of the 1 s cap gone before a batch
        return Drifting()

    done = run_trial(make, {}, batches=4, warmup=1, min_seconds=0.05, stable=1e-9, max_seconds=1.0)
    timed = done.rows / done.rate  # seconds of timed span
    assert done.ok and timed < 1.0 - 0.6 + 0.2  # a timed span of 1 s (the cap on it alone) would be past this
