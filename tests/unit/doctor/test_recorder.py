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


def test_the_report_says_what_recording_and_sampling_cost(tmp_path):
    from stoker.doctor.config import DoctorConfig
    from stoker.doctor.events import encode_line
    from stoker.doctor.report import build_report, cost_line

    lines = {
        100: [Meta(pid=100, ppid=1), Step(1, 1.0, 1.1), Meta(pid=100, end=4.0, cost_s=0.03)],
        101: [Meta(pid=101, ppid=100, forked=True), Meta(pid=101, end=4.0, cost_s=0.02)],
        102: [Meta(pid=102, ppid=100, forked=True)],  # a worker stopped before its end: no cost said
    }
    for pid, events in lines.items():
        (tmp_path / f"events-{pid}.jsonl").write_text(encode_line(events))
    report = build_report(tmp_path, [], "no GPU", DoctorConfig(), wall=(0.0, 5.0), sampler_cpu_s=0.1)
    cost = report.resources["doctor"]
    assert cost["recording_procs"] == 2 and cost["procs"] == 3 and abs(cost["recording_s"] - 0.05) < 1e-9
    assert cost_line(report) == (
        "sampling 0.10 CPU-s in the doctor's process; 6 events recorded by the script's processes, 50 ms encoding "
        "and writing them there (the 2 of 3 processes that reached their end); 3.0 % of one core over the run's 5.0 s"
    )


def test_a_held_event_is_written_with_the_next_one_in_a_forked_child(tmp_path):
    rec = Recorder(tmp_path, interval=0.05).start()
    pid = os.fork()
    if pid == 0:
        rec.hold((Step, 4, 1.0, 2.0))  # a collate: waits for its fetch
        with open(tmp_path / f"events-{os.getpid()}.jsonl") as f:
            before = sum(1 for _ in f)
        rec.emit((Step, 5, 2.0, 3.0))
        with open(tmp_path / f"events-{os.getpid()}.jsonl") as f:
            after = f.readlines()
        ok = len(after) == before + 1 and '["step",4,' in after[-1] and '["step",5,' in after[-1]
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    rec.hold((Step, 6, 0.0, 1.0))  # in the recording process, held is emitted: buffered like any other
    rec.close()
    assert os.waitstatus_to_exitcode(status) == 0
    assert [ev.loader for p, ev in read_events(tmp_path) if isinstance(ev, Step) and p == os.getpid()] == [6]
