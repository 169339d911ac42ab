"""When a trial ends (tune/trial.py ``Ending``): enough batches, then a stable rate or the cap."""

from __future__ import annotations

from stoker.tune.trial import Ending, settled


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
