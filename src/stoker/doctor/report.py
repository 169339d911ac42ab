"""``Report``: everything a doctor run found, built from the events directory and the samples."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from stoker.doctor.advice import Recommendation, bottleneck_resource, bottleneck_stage, recommend, verdict
from stoker.doctor.analysis import (
    MAX_STEPS,
    LoaderStats,
    build_loaders,
    cpu_seconds,
    label_loaders,
    loop_window,
    step_stats,
    summarize_resources,
)
from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import as_json
from stoker.doctor.ranks import rank_table, ranks_of, straggler
from stoker.doctor.recorder import read_events
from stoker.doctor.stalls import Stall, find

NO_LOADER = (
    "the script never fetched a batch from a torch DataLoader or a stoker.Loader "
    "(doctor times those two; a hand-written loop over tensors is not visible to it)"
)

_RUN_TIME = ("_stats", "origin", "rank_of")  # Report fields that report.json leaves out


@dataclass
class Report:
    """The result of a doctor run. ``to_json()`` is what ``report.json`` holds."""

    verdict: str = "no data loader seen"
    stall_share: float = 0.0
    loop_s: float = 0.0
    wait_s: float = 0.0
    wall_s: float = 0.0
    bottleneck_stage: str | None = None
    bottleneck_resource: str | None = None
    message: str = ""
    note: str = ""  # for a command that failed or fetched no batch: the interpreter that ran, an import it lacked
    command: list[str] | None = None
    exit_code: int | None = None
    gpu_status: str = "not sampled"
    loaders: list[dict[str, Any]] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)
    recommendations: list[Recommendation] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)  # one row per torchrun rank (ranks.py)
    samples: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # the first MAX_STEPS of each loader
    steps_left_out: int = 0  # steps not in ``steps``: past the first MAX_STEPS of their loader
    files: dict[str, str] = field(default_factory=dict)
    _stats: dict[str, LoaderStats] = field(default_factory=dict, repr=False)
    origin: float = 0.0  # perf_counter of the run's start; times in steps and samples are relative to it
    rank_of: dict[int, int] = field(default_factory=dict, repr=False)  # pid -> torchrun rank, for the trace

    @property
    def input_bound(self) -> bool:
        return self.verdict == "input-bound"

    @property
    def no_advice(self) -> str:
        """Why there is no recommendation, in a sentence (``""`` when there are some, or no loader was seen)."""
        if self.recommendations or not self.loaders:
            return ""
        if self.verdict == "compute-bound":
            return "no change to data loading would speed this run up: the data is ready when the step asks for it"
        return "no rule found a change to suggest from what this run measured"

    def to_json(self) -> dict[str, Any]:
        """Every field but the run-time ones (``_stats``, ``origin``), recommendations as dicts."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _RUN_TIME}
        out["recommendations"] = [r.to_json() for r in self.recommendations]
        out["stalls"] = [s.to_json() for s in self.stalls]
        return out

    def write_json(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=1, default=str), encoding="utf-8")
        return path


def doctor_cost(
    events: int, procs: dict[int, Any], steps: int, loop: tuple[float, float, float], sampler_cpu_s: float | None
) -> dict[str, Any]:
    """What the doctor itself cost a run (``resources["doctor"]`` of the report), estimated from what it timed.

    ``script_s``: the seconds the script's processes spent in the doctor (its hooks beyond the work they time,
    encoding and writing its ``events``), summed over the ``script_procs`` of ``procs`` processes that reached
    their end; ``sampler_cpu_s``: the CPU seconds of the sampling thread (where given). ``loop`` is (seconds from
    the first fetch to the last, the wall seconds of the run, the loop's seconds summed over processes).
    ``step_us`` is ``script_s`` plus the sampler's CPU during the loop (its share of the run's wall time), per
    step of every loader; ``step_share`` that over the mean step (loop seconds per step)."""
    costs = [m.cost_s for m in procs.values() if m.cost_s is not None]
    window, wall, loop_s = loop
    sampled = (sampler_cpu_s or 0.0) * min(1.0, window / wall) if wall > 0 else 0.0
    per_step = (sum(costs) + sampled) / steps if steps else None
    return {
        "events": events,
        "sampler_cpu_s": sampler_cpu_s,
        "script_s": sum(costs),
        "script_procs": len(costs),
        "procs": len(procs),
        "steps": steps,
        "step_us": None if per_step is None else 1e6 * per_step,
        "step_share": per_step / (loop_s / steps) if per_step is not None and loop_s > 0 else None,
    }


def cost_line(report: Report) -> str:
    """What the doctor itself cost this run, in one line (terminal and HTML)."""
    cost = report.resources.get("doctor", {})
    parts = []
    if cost.get("step_us") is not None:
        head = f"~{cost['step_us']:,.0f} us per step"
        if cost.get("step_share") is not None:
            step_ms = 1000 * report.loop_s / cost["steps"]
            head += f", {100 * cost['step_share']:.1f} % of the {step_ms:.2f} ms step"
        parts.append(f"{head} (an estimate from its own timing, over {cost['steps']:,} steps)")
    line = f"{cost.get('events', 0):,} events recorded by the script's processes"
    if cost.get("script_procs"):
        k, n = cost["script_procs"], cost["procs"]
        some = "" if k == n else f" (the {k} of {n} processes that reached their end)"
        line += f", {1000 * cost['script_s']:.0f} ms in its hooks and writing them there{some}"
    parts.append(line)
    if cost.get("sampler_cpu_s") is not None:
        parts.append(f"sampling {cost['sampler_cpu_s']:.2f} CPU-s in the doctor's process")
    return "; ".join(parts)


def build_report(
    events_dir: str | os.PathLike,
    samples: list[dict[str, Any]],
    gpu_status: str,
    config: DoctorConfig,
    *,
    wall: tuple[float, float],
    command: list[str] | None = None,
    exit_code: int | None = None,
    sampler_cpu_s: float | None = None,
) -> Report:
    """Read every process's events under ``events_dir`` and judge the run.

    ``resources["doctor"]`` says what the doctor itself cost (:func:`doctor_cost`); :func:`cost_line` says it in words."""
    recorded = [0]  # events read: counted as they stream by, not held (a long run has millions)

    def counted() -> Iterator[tuple[int, Any]]:
        for item in read_events(events_dir):
            recorded[0] += 1
            yield item

    loaders, procs = build_loaders(counted())
    active = {k: st for k, st in loaders.items() if st.steps}
    label_loaders(active)
    loop = loop_window(active)
    wait = sum(st.wait_s for st in active.values())
    stall = wait / loop if loop > 0 else 0.0
    stall = min(stall, 1.0)
    bound = verdict(stall, config.stall_threshold, active)
    first = min((st.steps[0].requested for st in active.values()), default=None)
    last = max((st.steps[-1].ready for st in active.values()), default=None)
    res = summarize_resources(samples, (first, last) if first is not None and last is not None else None)
    tree_s, root_s = cpu_seconds(samples, config.interval)
    res["cpu_s_tree"], res["cpu_s_root"] = tree_s, root_s
    steps = sum(len(st.steps) for st in active.values())
    window = last - first if first is not None and last is not None else 0.0
    res["doctor"] = doctor_cost(recorded[0], procs, steps, (window, wall[1] - wall[0], loop), sampler_cpu_s)
    report = Report(
        verdict=bound,
        stall_share=stall,
        loop_s=loop,
        wait_s=wait,
        wall_s=wall[1] - wall[0],
        command=command,
        exit_code=exit_code,
        gpu_status=gpu_status,
        resources=res,
        _stats=active,
        samples=[{**s, "t": s["t"] - wall[0]} for s in samples],
    )
    report.origin = wall[0]
    if not active:
        report.message = NO_LOADER
        return report
    main = max(active.values(), key=lambda s: s.wait_s)
    stage = bottleneck_stage(main) if bound == "input-bound" else None
    report.bottleneck_stage = stage["stage"] if stage else None
    report.bottleneck_resource = bottleneck_resource(bound, res, gpu_status)
    report.recommendations = recommend(active, res, bound, stall, gpu_status)
    report.stalls = find(active, samples, loop)
    report.ranks, report.rank_of = rank_table(active, procs, samples), ranks_of(procs)
    late = straggler(report.ranks)
    report.stalls += [late] if late else []
    for st in active.values():
        entry = {"key": st.key, "name": st.name, "info": as_json(st.info), **step_stats(st)}
        entry.update(batch_size=st.batch_size, random=st.random)
        entry.update(stages=st.stage_table(), batches=[as_json(b) for b in st.batches[:2]])
        report.loaders.append(entry)
        report.steps.extend(
            {"loader": st.key, "t0": s.requested - wall[0], "t1": s.ready - wall[0], "compute_before": s.compute_before}
            for s in st.steps[:MAX_STEPS]
        )
        report.steps_left_out += max(0, len(st.steps) - MAX_STEPS)
    report.steps.sort(key=lambda s: s["t0"])
    only = "" if bound == "input-bound" else "only "  # the message follows the verdict: it does not repeat it
    report.message = f"{only}{100 * stall:.0f} % of the loop's {loop:.2f} s is spent waiting for data"
    return report
