"""The Chrome-trace / Perfetto JSON of a report: steps (data wait, compute) and pipeline stages.

Open it in https://ui.perfetto.dev or chrome://tracing. One track per loader holds its data
waits and the compute between them; each stage runs on the track of the thread (or worker
process) that ran it; CPU, RSS and GPU samples are counters.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from stoker.doctor.report import Report

_US = 1e6


def trace_events(report: Report) -> list[dict[str, Any]]:
    origin = report.origin
    events: list[dict[str, Any]] = []
    tracks: dict[tuple[int, Any], int] = {}

    def track(pid: int, tid: Any, name: str) -> int:
        key = (pid, tid)
        if key not in tracks:
            tracks[key] = len(tracks) + 1
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tracks[key], "args": {"name": name}})
        return tracks[key]

    for st in report._stats.values():
        pid = int(st.key.split(":")[0])
        tid = track(pid, st.key, f"steps: {st.name}")
        prev = None
        for i, (t0, t1, _) in enumerate(st.steps):
            if prev is not None and t0 > prev:
                events.append({"name": "compute", "cat": "step", "ph": "X", "pid": pid, "tid": tid, "ts": (prev - origin) * _US, "dur": (t0 - prev) * _US})
            events.append({"name": "data wait", "cat": "step", "ph": "X", "pid": pid, "tid": tid, "ts": (t0 - origin) * _US,
                           "dur": (t1 - t0) * _US, "args": {"step": i}})  # fmt: skip
            prev = t1
        for stage, spid, thread, t0, t1 in st.spans:
            stid = track(spid, thread, f"stages: {st.name}" if spid == pid else f"worker {spid}: {st.name}")
            events.append({"name": f"stoker.{stage}" if st.info.get("kind") == "stoker" else stage, "cat": "stage", "ph": "X",
                           "pid": spid, "tid": stid, "ts": (t0 - origin) * _US, "dur": (t1 - t0) * _US})  # fmt: skip
    pid0 = min((int(k.split(":")[0]) for k in report._stats), default=0)
    for s in report.samples:
        ts = s["t"] * _US
        events.append({"name": "CPU cores busy", "ph": "C", "pid": pid0, "ts": ts, "args": {"script+workers": s["cpu_tree"], "main": s["cpu_root"]}})
        events.append({"name": "RSS MiB", "ph": "C", "pid": pid0, "ts": ts, "args": {"rss": s["rss"] / 2**20}})
        for i, g in enumerate(s.get("gpu", [])):
            if "util" in g:
                events.append({"name": f"GPU {i} %", "ph": "C", "pid": pid0, "ts": ts, "args": {"util": g["util"]}})
    return events


def write_trace(report: Report, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.write_text(json.dumps({"traceEvents": trace_events(report), "displayTimeUnit": "ms"}), encoding="utf-8")
    return path
