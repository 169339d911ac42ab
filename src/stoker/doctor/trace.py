"""The Chrome-trace / Perfetto JSON of a report: steps (data wait, compute) and pipeline stages.

Open it in https://ui.perfetto.dev or chrome://tracing. Under torchrun each rank is a process named
``rank N`` (its loaders and stages are its tracks, its workers' stages under their own pids). One
track per loader holds its data waits and the compute between them (its first ``MAX_STEPS`` steps;
the track's name says when there were more), and the decisions of its online tuner
(``num_workers="auto"``) as instant events; each stage runs on the track of the thread (or worker
process) that ran it (the first ``MAX_SPANS`` of a loader; the steps track's name says when there were
more); CPU, RSS and GPU samples are counters.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from stoker.doctor.analysis import MAX_STEPS
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

    for pid in sorted({st.pid for st in report._stats.values()} & set(report.rank_of)):
        name = f"rank {report.rank_of[pid]} (pid {pid})"
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        events.append(
            {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": report.rank_of[pid]}}
        )
    for st in report._stats.values():
        pid = st.pid
        kept = f" (the first {MAX_STEPS:,} of {len(st.steps):,})" if len(st.steps) > MAX_STEPS else ""
        spans = sum(len(durations) for durations in st.stages.values())
        kept += f" (stages: the first {len(st.spans):,} of {spans:,})" if spans > len(st.spans) else ""
        tid = track(pid, st.key, f"steps: {st.name}{kept}")
        prev = None
        for i, step in enumerate(st.steps[:MAX_STEPS]):
            t0, t1 = step.requested, step.ready
            if prev is not None and t0 > prev:
                events.append(_span("compute", "step", pid, tid, prev - origin, t0 - prev))
            events.append(_span("data wait", "step", pid, tid, t0 - origin, t1 - t0, {"step": i}))
            prev = t1
        for d in st.tunings:
            args = {"workers": d.workers, "prefetch": d.prefetch, "wait_share": d.wait_share, "rate": d.rate}
            events.append(
                {
                    "name": f"tune: {d.action}",
                    "cat": "tune",
                    "ph": "i",
                    "s": "t",
                    "pid": pid,
                    "tid": tid,
                    "ts": (d.at - origin) * _US,
                    "args": {**args, "busy": d.busy, "reason": d.reason},
                }
            )
        for spid, span in st.spans:
            stid = track(spid, span.thread, f"stages: {st.name}" if spid == pid else f"worker {spid}: {st.name}")
            name = f"stoker.{span.stage}" if st.info.kind == "stoker" else span.stage
            events.append(_span(name, "stage", spid, stid, span.start - origin, span.duration))
    pid0 = min((st.pid for st in report._stats.values()), default=0)
    for s in report.samples:
        ts = s["t"] * _US
        events.append(
            {
                "name": "CPU cores busy",
                "ph": "C",
                "pid": pid0,
                "ts": ts,
                "args": {"script+workers": s["cpu_tree"], "main": s["cpu_root"]},
            }
        )
        events.append({"name": "RSS MiB", "ph": "C", "pid": pid0, "ts": ts, "args": {"rss": s["rss"] / 2**20}})
        for i, g in enumerate(s.get("gpu", [])):
            if "util" in g:
                events.append({"name": f"GPU {i} %", "ph": "C", "pid": pid0, "ts": ts, "args": {"util": g["util"]}})
    return events


def _span(name: str, cat: str, pid: int, tid: int, start: float, duration: float, args: Any = None) -> dict[str, Any]:
    """A complete ("X") event on track ``(pid, tid)``: ``start`` and ``duration`` in seconds."""
    event = {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": start * _US, "dur": duration * _US}
    if args is not None:
        event["args"] = args
    return event


def write_trace(report: Report, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.write_text(json.dumps({"traceEvents": trace_events(report), "displayTimeUnit": "ms"}), encoding="utf-8")
    return path
