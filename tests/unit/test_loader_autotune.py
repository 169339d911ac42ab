"""num_workers="auto" / prefetch_factor="auto": options, reproducibility while the tuner resizes the
pool mid-epoch, state_dict across settings, the report and the observer hook."""

import itertools
import threading

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import ConfigError
from stoker.pipeline import autotune
from stoker.pipeline.autotune import AutoTuner, Decision, TuneReport


class Rows(torch.utils.data.Dataset):
    """A Dataset of 500 rows (each its own index): its batches are one worker task each."""

    def __len__(self):
        return 500

    def __getitem__(self, i):
        return {"i": torch.tensor(i), "x": torch.full((3,), float(i))}


def ids(loader, limit=None):
    return [b["i"].numpy().copy() for b in itertools.islice(loader, limit)]


def ids_of_store(loader, limit=None):
    return [b["label"].numpy().copy() for b in itertools.islice(loader, limit)]


@pytest.fixture
def scripted(monkeypatch):
    """Every batch ends a window, and each window moves to the next of a cycle of settings: the pool
    is resized and its depth changed all through the epoch. Returns the thread counts seen."""
    monkeypatch.setattr(autotune, "WINDOW_S", 0.0)
    monkeypatch.setattr(autotune, "MIN_BATCHES", 1)
    cycle = itertools.cycle([(1, 1), *[(0, 1)] * 6, (3, 2), (4, 8), (2, 1), (1, 4), (4, 1)])  # 0: inline
    seen = []

    def step(self, m):
        seen.append(self.knobs.threads)
        w, p = next(cycle)
        self._set(w if self.tune_workers else self.workers, p if self.tune_prefetch else self.prefetch)
        return self._record(m, "add worker", "scripted")

    monkeypatch.setattr(AutoTuner, "step", step)
    return seen


def test_auto_options_are_validated(mixed_store):
    for bad, option in [
        (dict(num_workers="many"), "num_workers"),
        (dict(prefetch_factor="deep"), "prefetch_factor"),
        (dict(memory_budget="2GB"), "memory_budget"),  # no "auto" setting: it would bound nothing
        (dict(num_workers="auto", memory_budget="plenty"), "memory_budget"),
        (dict(num_workers=0, prefetch_factor="auto"), "prefetch_factor"),
    ]:
        with pytest.raises(ConfigError) as err:
            stoker.Loader(mixed_store, batch_size=8, **bad)
        assert err.value.option == option
    loader = stoker.Loader(mixed_store, batch_size=8, num_workers="auto", memory_budget="2GB")
    assert loader.config.memory_budget == 2 * 2**30
    plain = stoker.Loader(mixed_store, batch_size=8)
    assert (loader.num_workers, loader.prefetch_factor) == (plain.num_workers, 2)  # starts from the default


def test_same_batches_while_the_tuner_resizes_mid_epoch(scripted):
    fixed = ids(stoker.Loader(Rows(), 4, shuffle=True, seed=7, num_workers=2, engine="threads"))
    tuned = stoker.Loader(Rows(), 4, shuffle=True, seed=7, num_workers="auto", prefetch_factor="auto", engine="threads")
    got = ids(tuned)
    assert len(got) == 125 and all(np.array_equal(a, b) for a, b in zip(got, fixed))
    assert {0, 1, 3, 4} <= set(scripted)  # the pool really ran with these sizes (0: inline) during the epoch
    assert len(tuned.tuning.decisions) >= 100


def test_store_batches_are_the_same_with_any_tuned_setting(mixed_store, scripted):
    want = ids_of_store(stoker.Loader(mixed_store, 4, shuffle=True, seed=3, num_workers=0))
    got = ids_of_store(stoker.Loader(mixed_store, 4, shuffle=True, seed=3, num_workers="auto", prefetch_factor="auto"))
    assert len(got) == 75 and all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize(
    "before,after",
    [
        (dict(num_workers="auto", prefetch_factor="auto"), dict(num_workers=2)),
        (dict(num_workers=1), dict(num_workers="auto", prefetch_factor="auto")),
        (dict(num_workers="auto"), dict(num_workers="auto", prefetch_factor="auto")),
    ],
)
def test_state_dict_is_valid_across_settings(scripted, before, after):
    common = dict(shuffle=True, seed=5, engine="threads")
    full = stoker.Loader(Rows(), 4, **common, **before)
    it = iter(full)
    head = [next(it)["i"].numpy().copy() for _ in range(40)]
    state = full.state_dict()
    tail = [b["i"].numpy().copy() for b in it]
    resumed = stoker.Loader(Rows(), 4, **common, **after)
    resumed.load_state_dict(state)
    again = ids(resumed)
    assert len(again) == len(tail) == 85 and all(np.array_equal(a, b) for a, b in zip(again, tail))
    assert sorted(np.concatenate(head + again)) == list(range(500))


class Heard(stoker.Observer):
    def __init__(self):
        self.decisions = []

    def tuned(self, info, decision):
        self.decisions.append((info.loader_id, decision, threading.get_ident()))


def test_decisions_reach_observers_and_the_report(mixed_store, scripted):
    heard = Heard()
    loader = stoker.Loader(mixed_store, 4, num_workers="auto", prefetch_factor="auto")
    loader.register_observer(heard)
    list(loader)
    report = loader.report()
    assert isinstance(report, TuneReport) and report.decisions and isinstance(report.decisions[0], Decision)
    assert [d for _, d, _ in heard.decisions] == list(report.decisions)
    assert {who for _, _, who in heard.decisions} == {threading.get_ident()}  # the consumer's thread
    assert (report.workers, report.prefetch) == (loader.num_workers, loader.prefetch_factor)
    assert "online tuning:" in str(report) and "scripted" in str(report)


def test_fixed_loaders_run_no_tuner(mixed_store, monkeypatch):
    def refuse(self, *a):
        raise AssertionError("a loader with fixed settings ran the tuner")

    monkeypatch.setattr(AutoTuner, "handed", refuse)
    loader = stoker.Loader(mixed_store, 4, num_workers=2, prefetch_factor=3)
    assert len(ids_of_store(loader)) == 75 and loader.tuning is None
    assert not isinstance(loader.report(), TuneReport)


def test_processes_are_resized_mid_epoch_with_the_same_batches(shm_clean, scripted):
    fixed = ids(stoker.Loader(Rows(), 4, shuffle=True, seed=2, num_workers=2, engine="processes"))
    loader = stoker.Loader(
        Rows(), 4, shuffle=True, seed=2, num_workers="auto", prefetch_factor="auto", engine="processes"
    )
    flights = []
    got = []
    for b in loader:
        got.append(b["i"].numpy().copy())
        flights.append(loader._tuner.knobs.in_flight)
    assert len(got) == 125 and all(np.array_equal(a, b) for a, b in zip(got, fixed))
    assert {1, 3, 4} <= set(scripted)  # the pool ran with these many processes during the epoch
    assert max(flights) > 8  # and deeper than 4 processes x prefetch 2
    assert len(loader.tuning.decisions) >= 100


def test_prefetch_auto_with_inline_reads_says_there_is_nothing_to_tune(mixed_store):
    loader = stoker.Loader(mixed_store, 4, prefetch_factor="auto")  # a small-batch store is read inline
    assert loader.num_workers == 0 and len(ids_of_store(loader)) == 75
    assert loader.tuning.decisions[0].action == "fixed" and "consumer's thread" in loader.tuning.decisions[0].reason
