"""report.html's plots: loaders of one name stay apart, equal lines stay visible, axes start at 0, plots fit the page."""

import json

from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import BatchDesc, BatchSeen, LoaderDesc, LoaderSeen, StageSpan, Step, TensorDesc, encode_line
from stoker.doctor.html import CSS, render_html, resources_figure, stages_figure, steps_figure
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
