"""The generated parts of the pages are current: the performance table (scripts/gen_perf_table.py, from the
results files in docs/data/), and the reliability guide names every fault-test file."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _perf():
    """scripts/gen_perf_table.py as a module (scripts/ is not a package)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module("gen_perf_table")
    finally:
        sys.path.remove(str(ROOT / "scripts"))


def test_the_performance_tables_are_generated_from_the_results_files():
    gen = _perf()
    block = gen.table(gen.runs())
    for page in gen.PAGES:
        text = page.read_text(encoding="utf-8")
        assert gen.render(text, block) == text, f"{page} is stale: run scripts/gen_perf_table.py"


def test_every_results_file_names_its_date_machine_and_command():
    for path in sorted((ROOT / "docs" / "data").glob("peers-*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        assert all(run.get(k) for k in ("date", "machine", "machine_short", "command")), path
        assert path.name.startswith(f"peers-{run['date']}")
        assert any(r["contender"] == "stoker" and "samples_per_s" in r for r in run["rows"]), path


def test_the_table_takes_the_newest_run_of_each_workload(tmp_path, monkeypatch):
    gen = _perf()
    rows = [
        {"contender": "stoker", "workload": "tensors", "samples_per_s": 300.0},
        {"contender": "FFCV", "workload": "tensors", "samples_per_s": 100.0},
        {"contender": "physical limit: memcpy (1 thread)", "workload": "tensors", "samples_per_s": 600.0},
    ]
    meta = {"machine": "m", "machine_short": "m", "command": "c"}
    (tmp_path / "peers-2026-01-01.json").write_text(json.dumps({"date": "2026-01-01", **meta, "rows": rows}))
    newer = [
        {"contender": "stoker", "workload": "tensors", "samples_per_s": 500.0},
        {**rows[1], "samples_per_s": 250.0},
    ]
    (tmp_path / "peers-2026-02-01.json").write_text(json.dumps({"date": "2026-02-01", **meta, "rows": newer}))
    monkeypatch.setattr(gen, "DATA", tmp_path)
    (line,) = [row for row in gen.table(gen.runs()) if row.startswith("| float32")]
    assert "| 500 | FFCV: 250 | **2.00×** | memcpy (1 thread), 2026-01-01: 600 | 0.83× | 2026-02-01, m |" in line


def test_the_reliability_guide_names_every_fault_test_file():
    guide = (ROOT / "docs" / "guides" / "reliability.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in (ROOT / "tests" / "faults").glob("test_*.py"))
    assert [f for f in files if f not in guide] == []


def test_the_readmes_links_lead_to_files_of_the_repository():
    """README.md is not part of the site (mkdocs --strict checks the site's links): its own links are checked here."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", readme) if not re.match(r"[a-z]+:", t)]
    assert len(targets) >= 10
    assert [t for t in targets if not (ROOT / t.split("#")[0]).exists()] == []
    guides = {t for t in targets if t.startswith("docs/guides/")}
    assert len(guides) >= 8  # a link into the site from every section
