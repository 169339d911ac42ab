"""Coordinate descent over a space (tune/search.py), on a known rate surface.

The measure here is a function of the setting, so the search's choices can be checked exactly;
the tuner's own trials on real loaders are tested in test_tune.py.
"""

from __future__ import annotations

import pytest

from stoker.tune.search import Trials, descend, grid
from stoker.tune.space import Space
from stoker.tune.trial import Trial

SPACE = Space({"num_workers": (0, 1, 2, 4, 8), "engine": ("threads", "processes"), "prefetch_factor": (1, 2, 4, 8)})


def surface(setting):
    """Peaks at 4 process workers with prefetch 4."""
    w, e, p = setting["num_workers"], setting["engine"], setting["prefetch_factor"]
    rate = 100.0 + 50 * min(w, 4) - 20 * max(0, w - 4) + (30 if e == "processes" and w else 0)
    return rate + (10 if p == 4 else 0)


def measure_with(rates, fail=()):
    def measure(setting):
        if setting in fail:
            return Trial(setting, None, None, 0.0, error="MemoryError: out of memory")
        return Trial(setting, rates(setting), 0.0, 0.0)

    return measure


def test_descent_finds_the_peak_in_fewer_trials_than_the_grid():
    trials = Trials(measure_with(surface))
    descend(SPACE, trials, {"num_workers": 2})
    best = trials.best()
    assert best.setting == {"num_workers": 4, "engine": "processes", "prefetch_factor": 4}
    full = Trials(measure_with(surface))
    grid(SPACE, full)
    assert full.best().rate == best.rate
    assert len(trials.done) < len(full.done) / 2


def test_each_setting_is_measured_once_then_the_two_fastest_again():
    trials = Trials(measure_with(surface))
    descend(SPACE, trials, {"num_workers": 2})
    *search, again1, again2 = [t.setting for t in trials.done]
    assert len(search) == len({tuple(sorted(s.items())) for s in search})
    assert [again1, again2] == trials.ranked()[:2] and {again1["num_workers"], again2["num_workers"]} <= {2, 4, 8}


def test_the_best_is_chosen_by_the_mean_of_its_trials():
    noisy = iter([100.0, 150.0, 120.0, 60.0, 130.0])  # A 100; B 150, 60; C 120, 130

    def measure(setting):
        return Trial(setting, next(noisy), 0.0, 0.0)

    trials = Trials(measure)
    a, b, c = {"num_workers": 1}, {"num_workers": 2}, {"num_workers": 4}
    for s in (a, b, c):
        trials.rate(s)
    trials.rate(b, again=True)  # 60: B's mean is 105
    trials.rate(c, again=True)  # 130: C's mean is 125
    assert trials.best().setting == c and trials.best().rate == 125.0 and trials.mean(b) == 105.0


def test_an_engine_is_tried_with_workers_when_the_search_stands_at_zero():
    def rates(s):  # threads lose to no workers; processes win
        return {"threads": 50.0, "processes": 300.0}[s["engine"]] if s["num_workers"] else 100.0

    trials = Trials(measure_with(rates))
    descend(SPACE, trials, {"num_workers": 0})
    assert trials.best().setting["engine"] == "processes"


def test_a_failed_trial_is_kept_and_the_search_goes_on():
    failing = {"num_workers": 4, "engine": "processes", "prefetch_factor": 2}
    seen = []
    trials = Trials(measure_with(surface, fail=[failing]), on_trial=seen.append)
    descend(SPACE, trials, {"num_workers": 2})
    failed = [t for t in trials.done if not t.ok]
    assert [t.setting for t in failed] == [failing] and "MemoryError" in failed[0].error
    assert trials.best().ok and trials.best().rate > 0
    assert seen == trials.done


def test_noise_below_the_minimum_gain_does_not_move_the_search():
    trials = Trials(measure_with(lambda s: 100.0 + s["num_workers"] * 0.1))
    descend(SPACE, trials, {"num_workers": 2})
    assert trials.best().setting["num_workers"] in (2, 4, 8)
    assert trials.done[0].setting["num_workers"] == 2
    assert all(t.setting["num_workers"] in (0, 1, 2, 4) for t in trials.done)  # 0: inline, tried once
    assert trials.best().rate == max(trials.mean(s) for s in trials.ranked())


def test_the_search_stops_once_a_rate_is_near_the_steps_bound():
    trials = Trials(measure_with(surface))
    descend(SPACE, trials, {"num_workers": 2}, ceiling=205.0)  # the start measures 200: within 5 %
    assert [t.setting for t in trials.done] == [{"num_workers": 2, "engine": "threads", "prefetch_factor": 2}] * 2
    far = Trials(measure_with(surface))
    descend(SPACE, far, {"num_workers": 2}, ceiling=400.0)
    assert far.best().setting == {"num_workers": 4, "engine": "processes", "prefetch_factor": 4}


def test_first_trials_are_screens_and_the_fastest_gets_a_full_trial():
    def confirmed(rates):
        trials = Trials(measure_with(rates))
        descend(SPACE, trials, {"num_workers": 2})
        return trials, [s for s in trials.ranked() if trials.count(s) > 1]

    trials, full = confirmed(surface)
    assert full[0] == trials.best().setting == {"num_workers": 4, "engine": "processes", "prefetch_factor": 4}
    assert len(full) == 2  # the runner-up (4 processes, prefetch 2: 320 of 330) is within 10 %
    _, full = confirmed(
        lambda s: 1000.0 if s == {"num_workers": 4, "engine": "threads", "prefetch_factor": 2} else 100.0
    )
    assert len(full) == 1  # every other setting is 10x slower: one confirming trial


def test_a_setting_leading_on_one_trial_gets_its_second():
    rates = {1: iter([100.0, 50.0]), 2: iter([95.0, 95.0])}  # 1 falls back on its second trial; 2 then leads

    def measure(setting):
        return Trial(setting, next(rates[setting["num_workers"]]), 0.0, 0.0)

    trials = Trials(measure)
    descend(Space({"num_workers": (1, 2)}), trials, {"num_workers": 1})
    assert [t.setting["num_workers"] for t in trials.done] == [1, 2, 1, 2]
    assert trials.best().setting == {"num_workers": 2} and trials.count({"num_workers": 2}) == 2


def test_each_candidate_is_told_the_rate_it_must_beat_and_confirmations_are_not_raced():
    told = []

    def race(setting, beat):
        told.append((setting, beat))
        return Trial(setting, surface(setting), 0.0, 0.0)

    trials = Trials(measure_with(surface), race=race)
    descend(SPACE, trials, {"num_workers": 2})
    assert trials.best().setting == {"num_workers": 4, "engine": "processes", "prefetch_factor": 4}
    start = trials.done[0]
    assert start.setting not in [s for s, _ in told]  # the start has nothing to beat
    assert told[0][1] == pytest.approx(start.rate * 1.03)  # the first candidate: the start plus min_gain
    assert all(beat >= start.rate * 1.03 - 1e-9 for _, beat in told)
    searched = [t.setting for t in trials.done[1:]]
    assert len(told) == len({tuple(sorted(s.items())) for s in searched})  # second trials are plain measures


def test_a_prefetch_depth_is_tried_with_workers_when_the_search_stands_at_zero():
    def rates(s):  # one worker loses at prefetch 2 but wins deeper (on-the-fly text with no step)
        if not s["num_workers"]:
            return 100.0
        deeper = {4: 120.0, 8: 150.0}.get(s["prefetch_factor"], 90.0)
        return deeper if s["engine"] == "threads" else 90.0

    trials = Trials(measure_with(rates))
    descend(SPACE, trials, {"num_workers": 0})
    assert trials.best().setting == {"num_workers": 1, "engine": "threads", "prefetch_factor": 8}


def test_the_deepest_prefetch_is_tried_before_the_shallower_ones_lose():
    def rates(s):  # one worker thread gains only at prefetch 8 (on-the-fly text with no step)
        if not s["num_workers"]:
            return 100.0
        return 150.0 if s["prefetch_factor"] == 8 and s["engine"] == "threads" else 90.0

    trials = Trials(measure_with(rates))
    descend(SPACE, trials, {"num_workers": 0})
    assert trials.best().setting == {"num_workers": 1, "engine": "threads", "prefetch_factor": 8}
    shallow = [t.setting["prefetch_factor"] for t in trials.done if t.setting["num_workers"] == 1]
    assert shallow.index(8) < shallow.index(4)  # 4 only on the next pass, stepping back from 8


def test_no_workers_is_tried_when_the_worker_climb_stops_short_of_it():
    """Inline (0 workers) is a mode of its own: on short epochs a process pool's start each pass made it
    the fastest for a user Dataset while one worker was the slowest, and a climb from the default
    (2 workers) stopped at 2 (bench_tune.py: the search kept 0.88x of the grid's best)."""
    space = Space({"num_workers": (0, 1, 2, 4), "engine": ("threads", "processes"), "prefetch_factor": (2,)})
    rates = {0: 300.0, 1: 100.0, 2: 200.0, 4: 150.0}
    trials = Trials(measure_with(lambda s: rates[s["num_workers"]] - (50 if s["engine"] == "threads" else 0)))
    descend(space, trials, {"num_workers": 2, "engine": "processes"})
    assert trials.best().setting["num_workers"] == 0
    assert trials.count(trials.best().setting) >= 1
