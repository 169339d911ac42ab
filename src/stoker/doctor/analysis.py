"""From events and samples to the numbers of a report: steps, stages, resources, the verdict.

Per loader (a torch DataLoader or a stoker.Loader, in any instrumented process):
``wait`` is the time inside each batch fetch, ``compute`` the time from one fetch's return to
the next fetch of the same loader. The *loop* of a process runs from its first fetch to its
last; the stall share is the data wait over the loop time, summed over processes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import mean, median
from typing import Any

MAX_SPANS = 100_000  # per loader, kept for the trace

# Stages of a stoker.Loader that run in worker threads (summed over threads, they can exceed wall time).
WORKER_STAGES = ("read", "collate", "transfer")
STAGE_LABELS = {
    "read": "read (source.read: gather, decode or tokenize)",
    "collate": "collate",
    "transfer": "transfer start (from_numpy, pin, host-to-device copy)",
    "h2d_wait": "host-to-device wait",
    "finalize": "finalize (on the device)",
}


@dataclass
class LoaderStats:
    key: str
    info: dict[str, Any]
    steps: list[tuple[float, float, float]] = field(default_factory=list)  # (t_request, t_got, compute before)
    stages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # stage -> durations
    batches: list[dict[str, Any]] = field(default_factory=list)
    spans: list[tuple[str, int, int, float, float]] = field(default_factory=list)  # (stage, pid, thread, t0, t1), for the trace

    @property
    def name(self) -> str:
        return self.info.get("name", "unknown loader")

    @property
    def wait_s(self) -> float:
        return sum(t1 - t0 for t0, t1, _ in self.steps)

    @property
    def compute_s(self) -> float:
        return sum(c for _, _, c in self.steps)

    def stage_table(self) -> list[dict[str, Any]]:
        """Per stage: total seconds, ms per call, calls, where it runs; largest first."""
        rows = []
        stages = dict(self.stages)
        if self.info.get("kind") == "torch" and "fetch" in stages:
            fetch, collate = stages.pop("fetch"), stages.pop("collate", [])
            ds = self.info.get("dataset", "Dataset")
            getitem = max(0.0, sum(fetch) - sum(collate))
            where = f"{self.info.get('num_workers', 0)} worker processes" if self.info.get("num_workers") else "main process"
            rows.append({"stage": f"{ds}.__getitem__", "total_s": getitem, "calls": len(fetch), "where": where})
            if collate:
                rows.append({"stage": "collate_fn", "total_s": sum(collate), "calls": len(collate), "where": where})
        for name, durations in stages.items():
            where = "worker threads" if name in WORKER_STAGES and self.info.get("num_workers") else "consumer"
            label = STAGE_LABELS.get(name, name)
            if name == "read" and self.info.get("dataset") and not self.info.get("store"):
                label = f"read ({self.info['dataset']})"
            rows.append({"stage": label, "key": name, "total_s": sum(durations), "calls": len(durations), "where": where})
        for r in rows:
            r["ms_per_call"] = 1000.0 * r["total_s"] / r["calls"] if r["calls"] else 0.0
        return sorted(rows, key=lambda r: -r["total_s"])


def build_loaders(events: list[tuple[int, list[Any]]]) -> tuple[dict[str, LoaderStats], dict[int, dict[str, Any]]]:
    """Group events by loader (``pid:id``); stage events of torch fetchers go to the loader of their dataset."""
    loaders: dict[str, LoaderStats] = {}
    procs: dict[int, dict[str, Any]] = defaultdict(dict)
    by_dataset: dict[int, str] = {}
    pending_stages: list[tuple[int, list[Any]]] = []
    last_got: dict[str, float] = {}
    for pid, ev in events:
        kind = ev[0]
        if kind == "meta":
            procs[pid].update(ev[1])
        elif kind == "loader":
            key = f"{pid}:{ev[1]}"
            if key not in loaders:
                loaders[key] = LoaderStats(key, ev[2])
                by_dataset.setdefault(ev[2].get("dataset_id", -1), key)
        elif kind == "step":
            key = f"{pid}:{ev[1]}"
            st = loaders.setdefault(key, LoaderStats(key, {"kind": "unknown", "name": "a loader created before doctor started"}))
            t0, t1 = ev[2], ev[3]
            prev = last_got.get(key)
            st.steps.append((t0, t1, max(0.0, t0 - prev) if prev is not None else 0.0))
            last_got[key] = t1
        elif kind in ("stage", "batch"):
            pending_stages.append((pid, ev))
    for pid, ev in pending_stages:
        key = f"{pid}:{ev[1]}"
        st = loaders.get(key) or loaders.get(by_dataset.get(ev[1], ""))  # forked workers: the parent's dataset id
        if st is None:
            continue
        if ev[0] == "batch":
            st.batches.append(ev[2])
        else:
            st.stages[ev[2]].append(ev[5] - ev[4])
            if len(st.spans) < MAX_SPANS:
                st.spans.append((ev[2], pid, ev[3], ev[4], ev[5]))
    for st in loaders.values():
        st.steps.sort()
    return loaders, dict(procs)


def loop_window(loaders: dict[str, LoaderStats]) -> float:
    """Seconds from first fetch to last fetch, summed over processes."""
    spans: dict[str, list[float]] = {}
    for key, st in loaders.items():
        if not st.steps:
            continue
        pid = key.split(":")[0]
        lo, hi = spans.get(pid, [float("inf"), float("-inf")])
        spans[pid] = [min(lo, st.steps[0][0]), max(hi, st.steps[-1][1])]
    return sum(hi - lo for lo, hi in spans.values())


def summarize_resources(samples: list[dict[str, Any]], window: tuple[float, float] | None) -> dict[str, Any]:
    """Means over the loop's window (all samples when there is no loop)."""
    if window is not None:
        inside = [s for s in samples if window[0] <= s["t"] <= window[1] + 1e-9]
        samples = inside or samples
    if not samples:
        return {"samples": 0}
    cores = len(samples[0]["cpu_cores"]) or 1
    out: dict[str, Any] = {
        "samples": len(samples),
        "cores": cores,
        "cpu_tree_cores": mean(s["cpu_tree"] for s in samples),
        "cpu_root_cores": mean(s["cpu_root"] for s in samples),
        "cpu_machine_pct": mean(mean(s["cpu_cores"]) for s in samples),
        "iowait_pct": mean(s["iowait"] for s in samples),
        "rss_max": max(s["rss"] for s in samples),
        "procs_max": max(s["procs"] for s in samples),
        "read_bps": mean(s["read_bps"] for s in samples),
        "disk_read_bps": mean(s["disk_read_bps"] for s in samples),
        "disk_iops": mean(s["disk_iops"] for s in samples),
    }
    gpu = [g for s in samples for g in s.get("gpu", []) if "util" in g]
    if gpu:
        out["gpu_util_pct"] = mean(g["util"] for g in gpu)
        out["gpu_mem_max"] = max(g["mem_used"] for g in gpu)
        rx = [g["pcie_rx_bps"] for g in gpu if "pcie_rx_bps" in g]
        out["pcie_rx_bps"] = mean(rx) if rx else None
    return out


def cpu_seconds(samples: list[dict[str, Any]], interval_of: Any = None) -> tuple[float, float]:
    """CPU seconds of the whole tree and of the root process alone, over every sample."""
    tree = root = 0.0
    last = None
    for s in samples:
        dt = s["t"] - last if last is not None else (interval_of or 0.0)
        tree += s["cpu_tree"] * dt
        root += s["cpu_root"] * dt
        last = s["t"]
    return tree, root


def step_stats(st: LoaderStats) -> dict[str, float]:
    waits = [t1 - t0 for t0, t1, _ in st.steps]
    comps = [c for _, _, c in st.steps[1:]]
    return {
        "steps": len(st.steps),
        "wait_s": sum(waits),
        "compute_s": sum(comps),
        "wait_ms_median": 1000 * median(waits) if waits else 0.0,
        "compute_ms_median": 1000 * median(comps) if comps else 0.0,
        "first_wait_s": waits[0] if waits else 0.0,
    }
