"""The stall finders on recorded events: counts per worker through the wire and the process tree, the
shared-memory and straggler rules, and the report's tables (terminal, HTML, trace) that show them."""

import io

from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import IterStart, LoaderDesc, LoaderSeen, Meta, StageSpan, Step, WorkerSeen, encode_line
from stoker.doctor.html import render_html
from stoker.doctor.ranks import rank_of, straggler
from stoker.doctor.report import build_report
from stoker.doctor.stalls import SHM_FILES, shm
from stoker.doctor.terminal import render
from stoker.doctor.trace import trace_events

DESC = LoaderDesc(kind="torch", name="DataLoader(Toy)", source="Toy", source_id=7, num_workers=2, batch_size=4)


def _write(tmp_path, pid, events):
    with open(tmp_path / f"events-{pid}.jsonl", "a") as f:
        f.write(encode_line(events))


def _main(tmp_path, pid=100, rank=None, wait=0.001, steps=20):
    events = [Meta(pid=pid, ppid=1, rank=rank), LoaderSeen(1, DESC), IterStart(1, 0.9, 0.95)]
    events += [Step(1, 1.0 + 0.1 * i, 1.0 + 0.1 * i + wait) for i in range(steps)]
    _write(tmp_path, pid, events)


def _worker(tmp_path, pid, parent, worker, batches):
    events = [Meta(pid=pid, ppid=parent, forked=True), WorkerSeen(7, worker, 2)]
    events += [StageSpan(7, "fetch", 1, 1.0 + 0.01 * i, 1.0 + 0.01 * i + 0.005, 4) for i in range(batches)]
    _write(tmp_path, pid, events)


def _report(tmp_path, samples=()):
    return build_report(tmp_path, list(samples), "no GPU", DoctorConfig(interval=0.1), wall=(0.0, 5.0))


def test_one_worker_making_most_batches_is_named_with_each_workers_count(tmp_path):
    _main(tmp_path)
    _worker(tmp_path, 101, 100, 0, 18)
    _worker(tmp_path, 102, 100, 1, 2)
    (stall,) = [s for s in _report(tmp_path).stalls if s.kind == "idle_workers"]
    assert "worker 0 produced 18 of 20 batches (worker 0: 18, worker 1: 2" in stall.verdict


def test_balanced_workers_and_too_few_batches_name_nothing(tmp_path):
    _main(tmp_path)
    _worker(tmp_path, 101, 100, 0, 10)
    _worker(tmp_path, 102, 100, 1, 10)
    assert not _report(tmp_path).stalls
    for f in tmp_path.iterdir():
        f.unlink()
    _main(tmp_path)
    _worker(tmp_path, 101, 100, 0, 3)  # three batches in all: too few to expect both workers to get one
    assert not _report(tmp_path).stalls


def test_shm_pile_up_and_its_absence():
    flat = [{"t": i, "shm_files": 10, "shm_managers": 1, "shm_bytes": 0} for i in range(5)]
    assert shm(flat, "the run") is None
    grown = [{**s, "shm_files": 10 + i * SHM_FILES} for i, s in enumerate(flat)]
    assert "/dev/shm grew by" in shm(grown, "the run").verdict
    managers = [{**s, "shm_managers": 3} for s in flat]
    assert "3 torch_shm_manager processes" in shm(managers, "the run").verdict


def _row(rank, wait, compute=1.0):
    share = wait / (wait + compute)
    return {"rank": rank, "wait_s": wait, "compute_s": compute, "wait_share": share, "stage": "", "cpu_cores": None}


def test_straggler_is_the_rank_whose_wait_is_far_above_the_others():
    assert straggler([_row(0, 0.01), _row(1, 0.02)]) is None  # both ready: nobody is late
    assert straggler([_row(0, 0.5), _row(1, 0.6)]) is None  # both slow alike: no single straggler
    late = straggler([_row(0, 0.01), _row(1, 0.9), _row(2, 0.03)])
    assert late.loader == "rank 1" and "against 0.02 s (median) on the other ranks" in late.verdict


def test_rank_of_a_worker_is_its_parents(tmp_path):
    procs = {10: Meta(pid=10, ppid=1), 11: Meta(pid=11, ppid=10, rank=1), 12: Meta(pid=12, ppid=11, forked=True)}
    assert [rank_of(p, procs) for p in (10, 11, 12, 99)] == [None, 1, 1, None]


def test_ranks_reach_the_report_terminal_html_and_trace(tmp_path):
    _main(tmp_path, pid=100, rank=0)
    _main(tmp_path, pid=200, rank=1, wait=0.08)
    report = _report(tmp_path)
    assert [(r["rank"], r["pid"], r["steps"]) for r in report.ranks] == [(0, 100, 20), (1, 200, 20)]
    (late,) = [s for s in report.stalls if s.kind == "straggler_rank"]
    assert late.loader == "rank 1"
    out = io.StringIO()
    render(report, file=out, width=200)
    assert "straggler: rank 1" in out.getvalue() and "ranks" in out.getvalue()
    page = render_html(report)
    assert "id='ranks'" in page and "id='stalls'" in page and "straggler: rank 1" in page
    names = [e["args"]["name"] for e in trace_events(report) if e["name"] == "process_name"]
    assert names == ["rank 0 (pid 100)", "rank 1 (pid 200)"]
