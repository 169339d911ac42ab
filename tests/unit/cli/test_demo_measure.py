"""`stoker demo`'s measure(): whole epochs from the loader's construction, on a clock the test drives (no timing)."""

from __future__ import annotations

import types

import pytest

import stoker.cli.demo as demo


class Clock:
    """A clock that moves only when the fake loader works."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class FakeLoader:
    """``batches`` batches of 32 per epoch, each taking ``per_batch`` clock seconds; built in ``build`` seconds."""

    def __init__(self, clock: Clock, build: float, batches: int, per_batch: float) -> None:
        clock.now += build
        self.clock, self.batches, self.per_batch, self.epochs = clock, batches, per_batch, 0

    def __iter__(self):
        self.epochs += 1
        for _ in range(self.batches):
            self.clock.now += self.per_batch
            yield list(range(32))


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(demo, "time", types.SimpleNamespace(perf_counter=c.perf_counter))
    return c


def test_a_short_budget_still_times_one_whole_epoch_and_the_construction(clock):
    made = []
    rate = demo.measure(lambda: made.append(FakeLoader(clock, 5.0, 10, 1.0)) or made[-1], len, seconds=1.0)
    assert made[0].epochs == 1
    assert rate == pytest.approx(10 * 32 / (5.0 + 10 * 1.0))  # construction and every batch of the epoch


def test_more_whole_epochs_until_the_budget_is_spent(clock):
    made = []
    rate = demo.measure(lambda: made.append(FakeLoader(clock, 0.0, 10, 1.0)) or made[-1], len, seconds=15.0)
    assert len(made) == 1 and made[0].epochs == 2  # one loader, two whole epochs, no partial third
    assert rate == pytest.approx(2 * 10 * 32 / 20.0)
