"""stoker.doctor.recorder: event files per process (forked children included), flushed while running."""

import os
import time

from stoker.doctor.events import Meta, Step
from stoker.doctor.recorder import Recorder, read_events


def test_events_are_written_per_process_and_a_forked_child_writes_its_own(tmp_path):
    rec = Recorder(tmp_path, interval=0.05).start()
    rec.emit((Step, 1, 0.0, 1.0))
    pid = os.fork()
    if pid == 0:  # the child: its event goes to its own file at once, even through os._exit
        rec.emit((Step, 2, 5.0, 6.0))
        os._exit(0)
    os.waitpid(pid, 0)
    rec.emit(Step(1, 1.0, 2.0))
    rec.close()
    steps = {}
    for p, ev in read_events(tmp_path):
        if isinstance(ev, Step):
            steps.setdefault(p, []).append(ev.loader)
    assert steps == {os.getpid(): [1, 1], pid: [2]}


def test_flusher_writes_while_running(tmp_path):
    rec = Recorder(tmp_path, interval=0.02).start()
    rec.emit((Step, 1, 0.0, 1.0))
    deadline = time.monotonic() + 60  # a bound for a broken flusher, not a speed: it writes within an interval
    while time.monotonic() < deadline and not any(isinstance(ev, Step) for _, ev in read_events(tmp_path)):
        time.sleep(0.02)
    rec.close()
    assert any(isinstance(ev, Step) for _, ev in read_events(tmp_path))


def _emit_in_child(rec):
    rec.emit((Step, 3, 7.0, 8.0))


def test_each_process_says_what_recording_cost_it_a_multiprocessing_child_at_its_exit(tmp_path):
    import multiprocessing

    rec = Recorder(tmp_path, interval=0.05).start()
    child = multiprocessing.get_context("fork").Process(target=_emit_in_child, args=(rec,))
    child.start()
    child.join()
    rec.emit((Step, 1, 0.0, 1.0))
    rec.close()
    ends = {}
    for p, ev in read_events(tmp_path):
        if isinstance(ev, Meta) and ev.end is not None:
            ends[p] = ev.cost_s
    # the child leaves through os._exit, after multiprocessing's finalizers: its recorder closed there
    assert set(ends) == {os.getpid(), child.pid}
    assert all(cost is not None and cost >= 0 for cost in ends.values())
