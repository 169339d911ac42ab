"""stoker.doctor.recorder: event files per process (forked children included), flushed while running."""

import os
import time

from stoker.doctor.events import Meta, Step
from stoker.doctor.html import render_html
from stoker.doctor.recorder import Recorder, read_events


def test_events_are_written_per_process_and_a_forked_child_writes_its_own(tmp_path):
    rec = Recorder(tmp_path, interval=0.05).start()
    rec.emit((Step, 1, 0.0, 1.0))
    pid = os.fork()
    if pid == 0:  # the child writes its own file once an interval has passed: kept through an os._exit after
        rec.emit((Step, 2, 5.0, 6.0))
        time.sleep(0.1)
        rec.emit((Step, 3, 6.0, 7.0))
        os._exit(0)
    os.waitpid(pid, 0)
    rec.emit(Step(1, 1.0, 2.0))
    rec.close()
    steps = {}
    for p, ev in read_events(tmp_path):
        if isinstance(ev, Step):
            steps.setdefault(p, []).append(ev.loader)
    assert steps == {os.getpid(): [1, 1], pid: [2, 3]}


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
    ends, steps = {}, []
    for p, ev in read_events(tmp_path):
        if isinstance(ev, Meta) and ev.end is not None:
            ends[p] = ev.cost_s
        steps += [(p, ev.loader)] if isinstance(ev, Step) else []
    # the child leaves through os._exit, after multiprocessing's finalizers: its recorder closed there,
    # writing the event it held
    assert set(ends) == {os.getpid(), child.pid} and (child.pid, 3) in steps
    assert all(cost is not None and cost >= 0 for cost in ends.values())


def test_the_report_says_what_the_doctor_itself_cost_per_step(tmp_path):
    from stoker.doctor.config import DoctorConfig
    from stoker.doctor.events import encode_line
    from stoker.doctor.report import build_report, cost_line

    steps = [Step(1, 1.0 + i, 1.5 + i) for i in range(4)]  # 4 steps of 1 s: the loop is 3.5 s, from 1.0 to 4.5
    lines = {
        100: [Meta(pid=100, ppid=1), *steps, Meta(pid=100, end=5.0, cost_s=0.03)],
        101: [Meta(pid=101, ppid=100, forked=True), Meta(pid=101, end=5.0, cost_s=0.02)],
        102: [Meta(pid=102, ppid=100, forked=True)],  # a worker stopped before its end: no cost said
    }
    for pid, events in lines.items():
        (tmp_path / f"events-{pid}.jsonl").write_text(encode_line(events))
    report = build_report(tmp_path, [], "no GPU", DoctorConfig(), wall=(0.0, 7.0), sampler_cpu_s=0.1)
    cost = report.resources["doctor"]
    assert cost["script_procs"] == 2 and cost["procs"] == 3 and abs(cost["script_s"] - 0.05) < 1e-9
    # per step: the script's 50 ms and the sampler's CPU over the loop's half of the run (50 ms), over 4 steps
    assert abs(cost["step_us"] - 25_000) < 1e-6 and abs(cost["step_share"] - 0.025 / (3.5 / 4)) < 1e-9
    assert cost_line(report) == (
        "~25,000 us per step, 2.9 % of the 875.00 ms step (an estimate from its own timing, over 4 steps); "
        "9 events recorded by the script's processes, 50 ms in its hooks and writing them there (the 2 of 3 "
        "processes that reached their end); sampling 0.10 CPU-s in the doctor's process"
    )
    assert "the doctor itself cost: ~25,000 us per step, 2.9 % of the 875.00 ms step" in render_html(report)
    assert cost_line(build_report(tmp_path / "none", [], "no GPU", DoctorConfig(), wall=(0.0, 1.0))) == (
        "0 events recorded by the script's processes"  # no step, no sampler: nothing per step to say
    )
