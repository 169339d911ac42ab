import threading
import time

import pytest

from stoker.errors import WorkerError
from stoker.pipeline.threads import ordered_map


def _stoker_threads():
    return [t for t in threading.enumerate() if t.name.startswith("stoker-")]


def test_order_is_kept_with_uneven_work():
    def slow_first(i):
        time.sleep(0.02 if i % 3 == 0 else 0)
        return i * 2

    assert list(ordered_map(slow_first, range(20), workers=3, depth=6)) == [i * 2 for i in range(20)]
    assert _stoker_threads() == []


def test_inline_when_no_workers():
    seen = []
    out = list(ordered_map(lambda i: seen.append(threading.current_thread().name) or i, range(3), workers=0, depth=2))
    assert out == [0, 1, 2] and set(seen) == {threading.current_thread().name}


def test_prefetch_is_bounded():
    started = []

    def work(i):
        started.append(i)
        return i

    it = ordered_map(work, range(100), workers=2, depth=4)
    next(it)
    time.sleep(0.05)
    assert len(started) <= 5
    it.close()


def test_error_is_reraised_with_stage_and_batch():
    def boom(i):
        if i == 3:
            raise KeyError("bad row")
        return i

    with pytest.raises(KeyError) as info:
        list(ordered_map(boom, range(10), workers=2, depth=4, stage="read"))
    assert any("stage 'read'" in n and "batch 3" in n for n in getattr(info.value, "__notes__", []))
    assert _stoker_threads() == []


def test_break_joins_threads():
    it = ordered_map(lambda i: i, range(1000), workers=2, depth=4)
    for i in it:
        if i == 5:
            break
    it.close()
    assert _stoker_threads() == []


def test_timeout():
    release = threading.Event()
    try:
        with pytest.raises(WorkerError, match="timeout=0.05"):
            list(ordered_map(lambda i: release.wait(30), range(2), workers=1, depth=1, timeout=0.05))
    finally:
        release.set()
    _wait_for_no_stoker_threads()


def _wait_for_no_stoker_threads():
    for t in _stoker_threads():
        t.join(30)
    assert _stoker_threads() == []


def test_a_stuck_read_raises_at_the_timeout_and_is_left_behind_as_a_daemon():
    """Issue 15 item 7: the error came only once the stuck read returned (never, for one that hangs)."""
    release = threading.Event()
    outcome = []

    def consume():
        try:
            # batch 0 is ready at once: 2 s leaves room for a loaded machine to hand it over first
            list(ordered_map(lambda i: release.wait(60) if i == 1 else i, range(4), workers=2, depth=2, timeout=2))
        except WorkerError as exc:
            outcome.append(exc)

    runner = threading.Thread(target=consume)
    runner.start()
    runner.join(30)  # a bound for a hang, not a speed check
    try:
        assert not runner.is_alive(), "the timeout did not end the iteration while the read was stuck"
        (exc,) = outcome
        assert "timeout=2" in str(exc) and "daemon" in str(exc) and exc.batch == 1
        left = _stoker_threads()
        assert left and all(t.daemon for t in left)
    finally:
        release.set()
        runner.join(30)
    _wait_for_no_stoker_threads()


def test_worker_threads_run_torch_single_threaded_and_leave_the_caller_alone():
    import torch

    before = torch.get_num_threads()
    seen = list(ordered_map(lambda i: torch.get_num_threads(), range(4), workers=2, depth=2))
    assert torch.get_num_threads() == before
    if "OpenMP" in torch.__config__.parallel_info():
        assert seen == [1, 1, 1, 1]


def test_at_exit_the_pools_finish_the_task_in_hand_and_skip_the_queued_ones():
    """A script that leaves a pass unfinished exits while worker threads still read: they are stopped
    before interpreter teardown (a daemon thread inside a gather aborted the process 2 times in 20)."""
    import time as _time

    from stoker.pipeline.threads import ThreadPool, stop_for_exit

    pool = ThreadPool(1, "exit-test")
    ran: list[int] = []
    first = pool.submit(lambda i: (_time.sleep(0.3), ran.append(i)), 1)
    queued = pool.submit(ran.append, 2)
    _time.sleep(0.05)  # the first task is in hand
    stop_for_exit([pool])  # what the interpreter's exit does to every live pool
    assert first.done and not queued.done and ran == [1]
    assert not any(t.is_alive() for t in pool.threads)
