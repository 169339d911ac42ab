"""report.html's plots: loaders of one name stay apart, equal lines stay visible, axes start at 0, plots fit the page."""

import json

from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import BatchDesc, BatchSeen, LoaderDesc, LoaderSeen, StageSpan, Step, TensorDesc, encode_line
from stoker.doctor.html import BARS, CSS, render_html, resources_figure, stages_figure, steps_figure
from stoker.doctor.report import build_report


def _report(tmp_path):
    desc = LoaderDesc(kind="torch", name="DataLoader(Toy)", source="Toy", source_id=7, batch_size=None)
    events = [
        LoaderSeen(1, desc),
        LoaderSeen(2, LoaderDesc(**{**desc.__dict__, "source_id": 8})),
    ]
    for key, sid, t0, rows in ((1, 7, 1.0, 256), (2, 8, 2.0, 8)):
        events.append(BatchSeen(key, BatchDesc("list", (TensorDesc("0", "float32", (rows, 4), "cpu"),))))
        for i in range(10):
            t = t0 + 0.05 * i
            events += [Step(key, t, t + 0.04), StageSpan(sid, "fetch", 1, t, t + 0.04, rows)]
    with open(tmp_path / "events-100.jsonl", "w") as f:
        f.write(encode_line(events))
    samples = [
        {
            "t": 1.0 + 0.1 * i,
            "cpu_tree": 1.0,
            "cpu_root": 1.0,
            "cpu_cores": [50.0, 50.0],
            "iowait": 0.0,
            "rss": 1e8,
            "procs": 1,
            "read_bps": 0.0,
            "disk_read_bps": 0.0,
            "disk_iops": 0.0,
        }
        for i in range(15)
    ]
    return build_report(tmp_path, samples, "no GPU", DoctorConfig(interval=0.1), wall=(0.0, 3.0))


def test_two_loaders_of_one_name_get_their_own_bars_and_panels(tmp_path):
    report = _report(tmp_path)
    names = [ld["name"] for ld in report.loaders]
    assert len(set(names)) == 2
    ax = stages_figure(report).axes[0]
    labels = [t.get_text().replace("\n", " ") for t in ax.get_yticklabels()]
    assert len(ax.patches) == 2 and all(any(n in lab for lab in labels) for n in names)
    steps = steps_figure(report)
    assert [a.get_title(loc="left") for a in steps.axes] == names


def test_equal_cpu_lines_stay_visible_and_axes_start_at_zero(tmp_path):
    ax = resources_figure(_report(tmp_path)).axes[0]
    tree, root = ax.lines[0], ax.lines[1]
    assert list(tree.get_ydata()) == list(root.get_ydata())  # no workers: the same values...
    assert tree.get_linewidth() > root.get_linewidth() and root.get_linestyle() == "--"  # ...drawn apart
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 2  # not 0.95..1.05 around a flat line of 1.0
    for a in resources_figure(_report(tmp_path)).axes + steps_figure(_report(tmp_path)).axes:
        assert a.get_ylim()[0] == 0


def test_plots_scale_to_the_page_and_long_stage_labels_wrap(tmp_path):
    report = _report(tmp_path)
    assert "figure svg{max-width:100%" in CSS
    ax = stages_figure(report).axes[0]
    assert all(max(len(line) for line in t.get_text().split("\n")) <= 48 for t in ax.get_yticklabels())
    page = render_html(report)
    assert page.count("<svg") == 3 and json.dumps(report.loaders[0]["name"])[1:-1] in page


def test_a_compute_bound_run_gets_a_sentence_not_an_empty_recommendations_table(tmp_path):
    desc = LoaderDesc(kind="torch", name="DataLoader(Toy)", source="Toy", source_id=7, batch_size=8)
    events = [LoaderSeen(1, desc)]
    for i in range(20):
        t = 1.0 + 0.05 * i
        events.append(Step(1, t, t + 0.001))  # 1 ms of wait per 50 ms step
    with open(tmp_path / "events-100.jsonl", "w") as f:
        f.write(encode_line(events))
    report = build_report(tmp_path, [], "no GPU", DoctorConfig(interval=0.1), wall=(0.0, 3.0))
    assert report.verdict == "compute-bound" and not report.recommendations
    page = render_html(report)
    advice = page[page.index("<h2>Recommendations</h2>") : page.index("<h2>Loaders</h2>")]
    assert "<table" not in advice and "no change to data loading would speed this run up" in advice


def _long_run(tmp_path, steps):
    """One loader, ``steps`` steps of 1 ms wait and 2 ms compute; step 1234 waits 300 ms."""
    desc = LoaderDesc(kind="torch", name="DataLoader(Toy)", source="Toy", source_id=7, batch_size=8)
    events, t = [LoaderSeen(1, desc)], 1.0
    for i in range(steps):
        wait = 0.3 if i == 1234 else 0.001
        events.append(Step(1, t, t + wait))
        t += wait + 0.002
    with open(tmp_path / "events-100.jsonl", "w") as f:
        f.write(encode_line(events))
    return build_report(tmp_path, [], "no GPU", DoctorConfig(interval=0.1), wall=(0.0, t + 1))


def test_a_long_runs_steps_plot_draws_one_bar_per_run_of_steps_with_their_means_and_the_slowest_wait(tmp_path):
    report = _long_run(tmp_path, 20_000)
    ax, slow = steps_figure(report).axes
    assert len(ax.patches) <= 2 * BARS  # wait and compute bars: 40,000 patches drawn one per step before
    wait_bars, comp_bars = ax.patches[: len(ax.patches) // 2], ax.patches[len(ax.patches) // 2 :]
    per = 20_000 // len(wait_bars)
    assert sum(b.get_width() for b in wait_bars) == 20_000  # every step is in one bar
    assert abs(wait_bars[0].get_height() - 1.0) < 1e-6 and abs(comp_bars[0].get_height() - 2.0) < 1e-6
    stalled = wait_bars[1234 // per]
    assert abs(stalled.get_height() - (299 + per) / per) < 1e-6  # the mean of its steps, one of 300 ms
    slowest = slow.lines[0].get_ydata()  # on its own axis: the means keep their scale
    assert abs(max(slowest) - 300) < 1e-6 and abs(slowest[1234 // per] - 300) < 1e-6  # the stall stays in the line
    assert f"mean of {per:,} steps" in ax.get_ylabel() and ax.get_ylim()[1] < 20 and slow.get_ylim()[0] == 0


def test_a_short_runs_steps_plot_keeps_one_bar_per_step(tmp_path):
    (ax,) = steps_figure(_long_run(tmp_path, 50)).axes
    assert len(ax.patches) == 100 and not ax.lines
    assert abs(ax.patches[0].get_height() - 1.0) < 1e-6


def test_report_json_and_the_trace_keep_the_first_steps_of_a_long_run_and_say_how_many_were_left_out(
    tmp_path, monkeypatch
):
    import stoker.doctor.report as report_module
    import stoker.doctor.trace as trace_module

    monkeypatch.setattr(report_module, "MAX_STEPS", 1_000)
    monkeypatch.setattr(trace_module, "MAX_STEPS", 1_000)
    report = _long_run(tmp_path, 3_000)
    assert len(report.steps) == 1_000 and report.steps_left_out == 2_000
    assert report.loaders[0]["steps"] == 3_000  # the statistics count every step
    assert report.to_json()["steps_left_out"] == 2_000
    events = trace_module.trace_events(report)
    waits = [e for e in events if e.get("name") == "data wait"]
    assert len(waits) == 1_000
    assert any("the first 1,000 of 3,000" in e["args"]["name"] for e in events if e.get("name") == "thread_name")


def test_the_trace_says_when_a_loaders_stages_were_more_than_it_keeps(tmp_path, monkeypatch):
    import stoker.doctor.analysis as analysis
    import stoker.doctor.trace as trace_module

    monkeypatch.setattr(analysis, "MAX_SPANS", 5)
    report = _report(tmp_path)  # two loaders, 10 fetch spans each
    events = trace_module.trace_events(report)
    assert sum(1 for e in events if e.get("cat") == "stage") == 10
    names = [e["args"]["name"] for e in events if e.get("name") == "thread_name" and "steps:" in e["args"]["name"]]
    assert len(names) == 2 and all("(stages: the first 5 of 10)" in n for n in names)
