"""``write_outputs``: a report's files under ``--out``: report.json, and report.html and trace.json as configured.

Apart from ``session.py`` so that the command line's doctor (``cli/doctor.py``) writes them without
importing the in-process instrumentation (and torch with it) before the script starts.
"""

from __future__ import annotations

from pathlib import Path

from stoker.doctor.config import DoctorConfig
from stoker.doctor.report import Report


def write_outputs(report: Report, config: DoctorConfig) -> dict[str, str]:
    """Write report.json (and report.html, trace.json as configured) under ``config.out``."""
    out = Path(config.out or ".")
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": str(out / "report.json")}
    if config.trace:
        from stoker.doctor.trace import write_trace

        files["trace"] = str(write_trace(report, out / "trace.json"))
    if config.html:
        from stoker.doctor.html import write_html

        files["html"] = str(write_html(report, out / "report.html"))
    report.files = files
    report.write_json(files["json"])
    return files
