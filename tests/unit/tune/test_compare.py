"""The best setting against the defaults, like with like: interleaved rounds, the spread, noise said."""

from __future__ import annotations

import json

from stoker.tune import tune
from stoker.tune.compare import Comparison, compare
from stoker.tune.trial import Trial


def _trials(rates: dict[str, list[float]]):
    """A trial function giving each setting's next rate in turn, and the order it was asked in."""
    asked: list[str] = []

    def trial(setting):
        name = setting["name"]
        asked.append(name)
        return Trial(setting, rates[name].pop(0), 0.0, 1.0)

    return trial, asked


def test_rounds_alternate_which_setting_runs_first_and_the_ratio_is_the_median_of_rounds():
    trial, asked = _trials({"best": [110.0, 130.0, 120.0], "defaults": [100.0, 100.0, 100.0]})
    c = compare(trial, {"name": "best"}, {"name": "defaults"}, rounds=3)
    assert asked == ["best", "defaults", "defaults", "best", "best", "defaults"]
    assert c.ratios == (1.1, 1.3, 1.2) and c.ratio == 1.2
    assert not c.within_noise and str(c) == "1.20x (rounds 1.10-1.30, 3 interleaved warm rounds)"


def test_overlapping_rates_are_no_gain_beyond_noise():
    trial, _ = _trials({"best": [104.0, 97.0, 101.0], "defaults": [99.0, 103.0, 100.0]})
    c = compare(trial, {"name": "best"}, {"name": "defaults"}, rounds=3)
    assert c.within_noise and str(c).endswith("no gain beyond noise")
    assert json.loads(json.dumps(c.to_json()))["within_noise"] is True


def test_a_failed_round_is_left_out_not_counted_as_zero():
    c = Comparison(best_rates=(120.0,), default_rates=(100.0, 90.0), ratios=(1.2,))
    assert c.ratio == 1.2
    assert Comparison((), (), ()).ratio is None and str(Comparison((), (), ())).startswith("not compared")


def test_tune_compares_its_best_with_the_defaults_in_interleaved_rounds(plain_store):
    result = tune(plain_store, batch_size=16, trial_batches=2, trial_seconds=0.0, step_ms=1)
    versus = result.versus_defaults
    if result.best.setting == result.defaults_setting:
        assert versus is None  # the defaults won: nothing to compare
    else:
        assert versus is not None and len(versus.best_rates) == len(versus.default_rates) == 3
        assert versus.ratio == sorted(versus.ratios)[1]
        assert result.to_json()["versus_defaults"]["ratios"] == list(versus.ratios)
