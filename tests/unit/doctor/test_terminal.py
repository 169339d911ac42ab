"""The terminal summary: the verdict said once, the unit of each stage row, the loader of each recommendation."""

import io

from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import LoaderDesc, LoaderSeen, StageSpan, Step, encode_line
from stoker.doctor.report import build_report
from stoker.doctor.terminal import render


def _printed(tmp_path, loaders):
    events = []
    for key, t0 in loaders:
        desc = LoaderDesc(kind="torch", name="DataLoader(Toy)", source="Toy", source_id=key + 100, batch_size=32)
        events.append(LoaderSeen(key, desc))
        for i in range(20):
            t = t0 + 0.05 * i
            events += [Step(key, t, t + 0.04), StageSpan(key + 100, "fetch", 1, t, t + 0.04, 32)]
    with open(tmp_path / "events-100.jsonl", "w") as f:
        f.write(encode_line(events))
    report = build_report(tmp_path, [], "no GPU", DoctorConfig(interval=0.1), wall=(0.0, 5.0))
    out = io.StringIO()
    render(report, file=out, width=200)
    return report, out.getvalue()


def test_the_headline_says_the_verdict_once(tmp_path):
    _, text = _printed(tmp_path, [(1, 1.0)])
    head = text.splitlines()[0]
    assert head.startswith("stoker doctor: input-bound - 81 % of the loop's") and head.count("input-bound") == 1


def test_getitem_rows_are_per_sample(tmp_path):
    _, text = _printed(tmp_path, [(1, 1.0)])
    row = next(line for line in text.splitlines() if "Toy.__getitem__" in line and "ms / sample" in line)
    assert "1.25 ms / sample" in row and " 640 " in row  # 20 fetches of 32 samples at 40 ms


def test_with_two_loaders_each_recommendation_names_its_loader(tmp_path):
    report, text = _printed(tmp_path, [(1, 1.0), (2, 3.0)])
    names = [ld["name"] for ld in report.loaders]
    assert names == ["DataLoader(Toy) (#1, batch_size=32)", "DataLoader(Toy) (#2, batch_size=32)"]
    table = text[text.index("recommendations") :]
    assert "loader" in table.splitlines()[2] and all(n in table for n in names)


def test_commands_are_printed_whole_below_a_narrow_table(tmp_path):
    report, _ = _printed(tmp_path, [(1, 1.0)])
    action = "once: stoker convert images /data/a/long/path/to/the/images/folder stores/folder; then: " + (
        "stoker.Loader(stoker.vision.ImageSource('stores/folder', stoker.vision.train_transforms(128)), shuffle=True)"
    )
    report.recommendations[0].action = action
    out = io.StringIO()
    render(report, file=out, width=80)
    lines = out.getvalue().splitlines()
    assert f"1. {action}" in lines  # one line, as printed: copied, it runs
    table = "\n".join(lines[: lines.index("how (commands to copy):")])
    assert "stoker convert" not in table  # the table keeps the words, the commands stay out of its columns
