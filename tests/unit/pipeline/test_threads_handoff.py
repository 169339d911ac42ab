"""The hand-off of results from worker threads to the consumer (``pipeline/threads.py``)."""

import threading

import pytest

from stoker.errors import WorkerError
from stoker.pipeline.threads import ordered_map


def test_a_timeout_error_raised_by_the_work_is_that_error_not_a_worker_timeout():
    # a read that raises TimeoutError (a socket, a lock) is the read's error, with its batch named;
    # only the map's own wait past ``timeout=`` is a WorkerError
    def read(i):
        if i == 3:
            raise TimeoutError("read timed out on host x")
        return i

    with pytest.raises(TimeoutError, match="host x") as info:
        list(ordered_map(read, range(8), workers=2, depth=4, timeout=30.0))
    assert not isinstance(info.value, WorkerError)
    assert any("batch 3" in note for note in getattr(info.value, "__notes__", []))


def test_tasks_not_started_when_the_map_is_left_are_not_run():
    gate = threading.Event()  # never set: task 1 holds the only thread a moment, no longer
    ran = []

    def work(i):
        if i == 1:
            gate.wait(0.2)
        ran.append(i)
        return i

    it = ordered_map(work, range(50), workers=1, depth=8)
    assert next(it) == 0
    it.close()  # tasks 2..9 are queued behind task 1: the thread skips them
    assert ran in ([0], [0, 1])
