"""Worker lifecycle under misuse and kills (issue 15 items 5-8).

Timeouts here only bound hangs (a test fails if something is not done within 30-60 s); nothing
asserts that anything was fast.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import ConcurrentIterationError, WorkerError

pytestmark = pytest.mark.faults


class Rows(torch.utils.data.Dataset):
    """A map-style Dataset (read by worker processes); ``kill_at`` SIGKILLs the worker reading that row."""

    def __init__(self, n=64, kill_at=None):
        self.n, self.kill_at = n, kill_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return np.full(3, i, dtype=np.int64)


def _running(pid):
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _rows(batches):
    return sorted(int(r) for b in batches for r in b[:, 0])


# -- item 5: workers watch the consumer process, not the thread that started them ----------------
def test_persistent_workers_outlive_the_thread_that_ran_the_first_epoch(in_thread):
    """Old code: PR_SET_PDEATHSIG killed the workers when that thread ended; epoch 2 raised WorkerError."""
    with stoker.Loader(Rows(), batch_size=8, num_workers=2, persistent_workers=True) as loader:
        assert _rows(in_thread(lambda: list(loader))) == list(range(64))
        second = in_thread(lambda: list(loader))  # bounded: a hang fails
        assert not isinstance(second, BaseException), second
        assert _rows(second) == list(range(64))


def test_an_iterator_started_in_a_thread_that_ended_goes_on_in_another(in_thread):
    loader = stoker.Loader(Rows(), batch_size=8, num_workers=2)
    it = iter(loader)
    first = in_thread(lambda: next(it))
    rest = in_thread(lambda: list(it))
    assert not isinstance(rest, BaseException), rest
    assert _rows([first, *rest]) == list(range(64))


def test_a_killed_worker_is_reported_by_its_signal_without_guessing_the_cause():
    """Old code blamed 'the out-of-memory killer' for any death, with no evidence."""
    loader = stoker.Loader(Rows(kill_at=20), batch_size=8, num_workers=2)
    with pytest.raises(WorkerError) as info:
        list(loader)
    message = str(info.value)
    assert "SIGKILL" in message and "exit code -9" in message
    assert "usual causes" not in message


# -- item 6: one pass at a time ------------------------------------------------------------------
def test_two_threads_on_one_loader_with_persistent_process_workers_get_a_clear_error(in_thread):
    """Old code: both threads deadlocked in the pool's _get (or a bare RuntimeError came)."""
    with stoker.Loader(Rows(), batch_size=8, num_workers=2, persistent_workers=True) as loader:
        first = iter(loader)
        next(first)
        err = in_thread(lambda: next(iter(loader)))
        assert isinstance(err, ConcurrentIterationError), err
        assert "one loader per thread" in str(err)
        assert len(list(first)) == len(loader) - 1
        assert _rows(list(loader)) == list(range(64))  # the next pass works


# -- item 7: timeout= for thread workers ---------------------------------------------------------
def test_a_read_that_never_returns_ends_at_the_timeout_and_the_process_can_exit(tmp_path):
    """Old code: shutdown joined the stuck thread, so the error never came and the process never exited."""
    script = tmp_path / "stuck.py"
    script.write_text(
        textwrap.dedent(
            """
            import threading
            import numpy as np
            import stoker

            class Stuck(stoker.BatchSource):
                def __len__(self):
                    return 16

                def read(self, chunk):
                    if int(chunk[0][0]) >= 8:
                        threading.Event().wait()  # never returns
                    return [{"x": np.asarray(b)} for b in chunk]

            # batches 0 and 1 are ready at once; 3 s leaves room for a loaded machine to deliver them
            loader = stoker.Loader(Stuck(), batch_size=4, num_workers=1, engine="threads", timeout=3)
            got = 0
            try:
                for _ in loader:
                    got += 1
            except stoker.errors.WorkerError as exc:
                print("timed out after", got, "batches:", exc)
            """
        )
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "timed out after 2 batches" in proc.stdout and "daemon" in proc.stdout


# -- item 8: no segment outlives its consumer ----------------------------------------------------
def test_kill_9_of_the_consumer_leaves_no_segment_in_dev_shm(tmp_path):
    """Old code: the segments already written for batches not yet read stayed until another pool started."""
    report = tmp_path / "report"
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import multiprocessing, os, signal, time
            import numpy as np, torch, stoker

            class D(torch.utils.data.Dataset):
                def __len__(self):
                    return 100_000

                def __getitem__(self, i):
                    return np.zeros(10_000, dtype=np.float32)

            me = os.getpid()
            for i, b in enumerate(stoker.Loader(D(), batch_size=64, num_workers=2, prefetch_factor=4)):
                time.sleep(0.2)  # a slow consumer: the workers run ahead and fill the queue
                if i == 3:
                    deadline = time.monotonic() + 60  # until the workers have run ahead (a hang bound, not a speed)
                    mine = []
                    while not mine and time.monotonic() < deadline:
                        time.sleep(0.05)
                        mine = [f for f in os.listdir("/dev/shm") if f.startswith(f"stoker_{{me}}_")]
                    workers = [str(p.pid) for p in multiprocessing.active_children()]
                    with open({str(report)!r}, "w") as f:
                        f.write(" ".join(workers) + "\\n" + str(len(mine)))
                    os.kill(me, signal.SIGKILL)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)])
    assert proc.wait(timeout=600) == -signal.SIGKILL  # a hang bound
    workers, in_flight = report.read_text().split("\n")
    assert int(in_flight) > 0  # segments were waiting to be read when the consumer died
    deadline = time.monotonic() + 60  # a bound for workers that never die, not a speed
    while any(map(_running, workers.split())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(_running, workers.split())), "the workers outlived the consumer"
    left = [f for f in os.listdir("/dev/shm") if f.startswith(f"stoker_{proc.pid}_")]
    assert left == []
