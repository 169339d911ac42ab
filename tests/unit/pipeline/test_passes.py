"""One pass at a time over a loader (issue 15 item 6): concurrent passes refused, abandoned ones closed."""

import numpy as np
import pytest

import stoker
from stoker.errors import ConcurrentIterationError, StokerError


@pytest.fixture
def loader(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(64, dtype=np.int64)})
    return stoker.Loader(tmp_path / "s", batch_size=4, num_workers=2)


def test_a_pass_running_in_another_thread_is_refused_at_once(loader, in_thread):
    """Old code: the second pass ran beside the first (thread workers) and state_dict() was meaningless."""
    first = iter(loader)
    next(first)  # this thread holds a pass in progress
    err = in_thread(lambda: next(iter(loader)))
    assert isinstance(err, ConcurrentIterationError) and isinstance(err, StokerError)
    assert "one loader per thread" in str(err)
    assert sum(1 for _ in first) == len(loader) - 1  # the first pass is untouched
    assert loader.state_dict()["batches_done"] == 0 and loader.epoch == 1


def test_sequential_passes_from_several_threads_work(loader, in_thread):
    assert in_thread(lambda: len(list(loader))) == len(loader)
    assert len(list(loader)) == len(loader)
    assert loader.epoch == 2


def test_an_abandoned_pass_is_closed_by_the_next_pass_of_the_same_thread(loader):
    kept = iter(loader)
    next(kept)  # kept alive, never finished
    assert len(list(loader)) == len(loader)  # each pass takes its own epoch
    assert loader.epoch == 2
    with pytest.raises(ConcurrentIterationError, match="new pass"):
        next(kept)  # not a silent, early end of its epoch


def test_a_pass_left_by_a_thread_that_ended_does_not_block_the_next(loader, in_thread):
    holder = {}

    def start():
        holder["it"] = iter(loader)
        return next(holder["it"])

    in_thread(start)
    assert len(list(loader)) == len(loader)


def test_a_pass_started_in_one_thread_can_go_on_in_another(loader, in_thread):
    it = iter(loader)
    next(it)
    assert in_thread(lambda: sum(1 for _ in it)) == len(loader) - 1
    assert len(list(loader)) == len(loader)  # and the guard was given back


def test_a_dropped_pass_gives_the_guard_back(loader, in_thread):
    it = iter(loader)
    del it  # never started
    next(iter(loader))  # started, then dropped at once
    assert in_thread(lambda: len(list(loader))) == len(loader)
