"""From events and samples to the numbers of a report: steps, stages, resources, the verdict.

Per loader (a torch DataLoader or a stoker.Loader, in any instrumented process):
``wait`` is the time inside each batch fetch, ``compute`` the time from one fetch's return to
the next fetch of the same loader. The *loop* of a process runs from its first fetch to its
last; the stall share is the data wait over the loop time, summed over processes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean, median
from typing import Any

from stoker.doctor.events import (
    BatchDesc,
    BatchSeen,
    DeviceStep,
    Event,
    IterStart,
    LoaderDesc,
    LoaderSeen,
    Meta,
    Probe,
    StageSpan,
    Step,
    Tuned,
    WorkerSeen,
)

MAX_SPANS = 100_000  # per loader, kept for the trace
MAX_STEPS = 100_000  # per loader, the first ones kept in report.json and the trace; every step counts in the figures

STAGE_LABELS = {
    "read": "read (source.read: gather, decode or tokenize)",
    "collate": "collate",
    "transfer": "transfer start (from_numpy, pin, host-to-device copy)",
    "h2d_wait": "host-to-device wait",
    "finalize": "finalize (on the device)",
}


@dataclass(frozen=True, slots=True)
class StepTime(Step):
    """One batch fetch of a loader (its :class:`Step`), and the compute since the fetch before it (0 for the first)."""

    compute_before: float

    @property
    def wait(self) -> float:
        """The data wait of this fetch."""
        return self.ready - self.requested


@dataclass
class WorkerFacts:
    """One worker process of a loader: its id among the loader's workers (-1: not known), the batches
    it produced (fetches that returned) and the seconds it spent producing them."""

    worker: int = -1
    batches: int = 0
    busy_s: float = 0.0


@dataclass
class LoaderStats:
    """Everything recorded about one loader: ``key`` is ``"<pid>:<loader id>"``.

    ``label`` names it in reports, distinct among the loaders of a run (see :func:`label_loaders`);
    ``random`` says whether its Dataset's ``__getitem__`` gave two different outputs for one index
    (None: not probed).
    """

    key: str
    info: LoaderDesc
    steps: list[StepTime] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # stage -> durations
    items: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # stage -> samples handled
    batches: list[BatchDesc] = field(default_factory=list)
    spans: list[tuple[int, StageSpan]] = field(default_factory=list)  # (pid, span) for the trace
    tunings: list[Tuned] = field(default_factory=list)  # the online tuner's decisions, for the trace
    random: bool | None = None
    label: str = ""
    workers: dict[int, WorkerFacts] = field(default_factory=dict)  # worker process pid -> what it did
    iters: list[tuple[float, float]] = field(default_factory=list)  # iter(loader): (start, end), epoch starts
    device: list[DeviceStep] = field(default_factory=list)  # the loop's CUDA copies and syncs, per step watched

    @property
    def pid(self) -> int:
        return int(self.key.split(":", 1)[0])

    @property
    def name(self) -> str:
        return self.label or self.info.name

    @property
    def batch_size(self) -> int | None:
        """Rows per batch: the loader's setting, else the leading dimension of the inspected batches."""
        if self.info.batch_size is not None:
            return self.info.batch_size
        firsts = [b.tensors[0].shape[0] for b in self.batches if b.tensors and b.tensors[0].shape]
        return Counter(firsts).most_common(1)[0][0] if firsts else None

    @property
    def wait_s(self) -> float:
        return sum(s.wait for s in self.steps)

    @property
    def compute_s(self) -> float:
        return sum(s.compute_before for s in self.steps)

    def _where(self, stage: str) -> str:
        """Where a stage of a stoker loader runs."""
        info = self.info
        if not info.num_workers:
            return "consumer"
        workers = "worker processes" if info.engine == "processes" else "worker threads"
        if stage in ("read", "collate"):
            return workers
        return "worker threads" if stage == "transfer" and info.engine != "processes" else "consumer"

    def stage_table(self) -> list[dict[str, Any]]:
        """Per stage: total seconds, calls, ms per call, the unit of a call, where it runs; largest first.

        A call of a torch Dataset's ``__getitem__`` is one sample (each fetch counts its samples);
        a ``collate_fn`` call is one batch; a stoker worker's ``read``, ``collate`` and ``transfer``
        handle a chunk (one worker task of one or more batches); the consumer's stages one batch.
        """
        rows: list[dict[str, Any]] = []
        stages = dict(self.stages)
        info = self.info
        if info.kind == "torch" and "fetch" in stages:
            fetch, collate = stages.pop("fetch"), stages.pop("collate", [])
            ds = info.source or "Dataset"
            getitem = max(0.0, sum(fetch) - sum(collate))
            where = f"{info.num_workers} worker processes" if info.num_workers else "main process"
            samples = self.items.get("fetch") or len(fetch)
            rows.append(
                {"stage": f"{ds}.__getitem__", "total_s": getitem, "calls": samples, "unit": "sample", "where": where}
            )
            if collate:
                rows.append(
                    {
                        "stage": "collate_fn",
                        "total_s": sum(collate),
                        "calls": len(collate),
                        "unit": "batch",
                        "where": where,
                    }
                )
        for name, durations in stages.items():
            label = STAGE_LABELS.get(name, name)
            if name == "read" and info.source and not info.store:
                label = f"read ({info.source})"
            where = self._where(name)
            unit = "chunk" if where.startswith("worker") else "batch"
            rows.append(
                {
                    "stage": label,
                    "key": name,
                    "total_s": sum(durations),
                    "calls": len(durations),
                    "unit": unit,
                    "where": where,
                }
            )
        for r in rows:
            r["ms_per_call"] = 1000.0 * r["total_s"] / r["calls"] if r["calls"] else 0.0
        return sorted(rows, key=lambda r: -r["total_s"])


def _lineage(pid: int, procs: dict[int, Meta]) -> list[int]:
    """``pid``, its parent, its parent's parent... as far as the recorded processes go."""
    out = [pid]
    while len(out) < 16:
        meta = procs.get(out[-1])
        if meta is None or meta.ppid is None or meta.ppid in out:
            break
        out.append(meta.ppid)
    return out


def build_loaders(events: Iterable[tuple[int, Event]]) -> tuple[dict[str, LoaderStats], dict[int, Meta]]:
    """Group events by loader (``pid:id``).

    A stage or batch event of a worker process goes to the loader of the same id in the process
    that forked it; a stage of a torch dataset fetcher (keyed by the Dataset's id) goes to the
    loader over that Dataset.
    """
    loaders: dict[str, LoaderStats] = {}
    procs: dict[int, Meta] = {}
    by_source: dict[Any, str] = {}  # a Dataset's id, and (pid, its id), -> its loader
    pending: list[tuple[int, StageSpan | BatchSeen | WorkerSeen | IterStart]] = []
    probes: list[Probe] = []
    last_ready: dict[str, float] = {}
    for pid, ev in events:
        if isinstance(ev, Step):  # the most frequent first
            key = f"{pid}:{ev.loader}"
            st = loaders.get(key) or loaders.setdefault(key, LoaderStats(key, LoaderDesc.unknown()))
            prev = last_ready.get(key)
            compute = max(0.0, ev.requested - prev) if prev is not None else 0.0
            st.steps.append(StepTime(ev.loader, ev.requested, ev.ready, compute))
            last_ready[key] = ev.ready
        elif isinstance(ev, (StageSpan, BatchSeen, WorkerSeen, IterStart)):
            pending.append((pid, ev))
        elif isinstance(ev, Meta):
            procs[pid] = procs[pid].merged(ev) if pid in procs else ev
        elif isinstance(ev, LoaderSeen):
            key = f"{pid}:{ev.loader}"
            if key not in loaders:
                loaders[key] = LoaderStats(key, ev.info)
                by_source.setdefault(ev.info.source_id, key)
                by_source.setdefault((pid, ev.info.source_id), key)
        elif isinstance(ev, Probe):
            probes.append(ev)
        elif isinstance(ev, DeviceStep):
            key = f"{pid}:{ev.loader}"
            loaders.setdefault(key, LoaderStats(key, LoaderDesc.unknown())).device.append(ev)
        elif isinstance(ev, Tuned):
            loaders.setdefault(
                f"{pid}:{ev.loader}", LoaderStats(f"{pid}:{ev.loader}", LoaderDesc.unknown())
            ).tunings.append(ev)
    owners: dict[tuple[int, int], LoaderStats | None] = {}  # (pid, an event's loader) -> the loader it goes to
    for pid, ev in pending:
        if (pid, ev.loader) not in owners:
            lineage = _lineage(pid, procs)
            owner = next((f"{p}:{ev.loader}" for p in lineage if f"{p}:{ev.loader}" in loaders), None)
            owner = owner or next((by_source[(p, ev.loader)] for p in lineage if (p, ev.loader) in by_source), None)
            owners[pid, ev.loader] = loaders.get(owner or by_source.get(ev.loader, ""))
        found = owners[pid, ev.loader]
        if found is None:
            continue
        if isinstance(ev, BatchSeen):
            found.batches.append(ev.batch)
        elif isinstance(ev, IterStart):
            found.iters.append((ev.start, ev.end))
        elif isinstance(ev, WorkerSeen):
            found.workers.setdefault(pid, WorkerFacts()).worker = ev.worker
        else:
            if ev.stage == "fetch" and pid != found.pid:
                worker = found.workers.setdefault(pid, WorkerFacts())
                worker.batches += 1
                worker.busy_s += ev.duration
            found.stages[ev.stage].append(ev.duration)
            found.items[ev.stage] += ev.items
            if len(found.spans) < MAX_SPANS:
                found.spans.append((pid, ev))
    for st in loaders.values():
        st.steps.sort(key=lambda s: s.requested)
        st.iters.sort()
        answers = {p.random for p in probes if p.loader == st.info.source_id}
        st.random = True if True in answers else False if False in answers else None
        st.label = st.info.name
    return loaders, procs


def label_loaders(loaders: dict[str, LoaderStats]) -> None:
    """Give each loader a distinct ``label``: the script's variable for it and its name; among equal
    labels, ``#n`` in the order of first fetch and the batch size."""
    for st in loaders.values():
        st.label = f"{st.info.variable} = {st.info.name}" if st.info.variable else st.info.name
    counts = Counter(st.label for st in loaders.values())
    seen: Counter[str] = Counter()
    ordered = sorted(loaders.values(), key=lambda s: s.steps[0].requested if s.steps else float("inf"))
    for st in ordered:
        if counts[st.label] > 1:
            seen[st.label] += 1
            size = f", batch_size={st.batch_size}" if st.batch_size is not None else ""
            st.label = f"{st.label} (#{seen[st.label]}{size})"


def loop_window(loaders: dict[str, LoaderStats]) -> float:
    """Seconds from first fetch to last fetch, summed over processes."""
    spans: dict[int, list[float]] = {}
    for st in loaders.values():
        if not st.steps:
            continue
        lo, hi = spans.get(st.pid, [float("inf"), float("-inf")])
        spans[st.pid] = [min(lo, st.steps[0].requested), max(hi, st.steps[-1].ready)]
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
        "pss_max": max(s.get("pss", s["rss"]) for s in samples),
        "uss_max": max(s.get("uss", s["rss"]) for s in samples),
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
    waits = [s.wait for s in st.steps]
    comps = [s.compute_before for s in st.steps[1:]]
    return {
        "steps": len(st.steps),
        "wait_s": sum(waits),
        "compute_s": sum(comps),
        "wait_ms_median": 1000 * median(waits) if waits else 0.0,
        "compute_ms_median": 1000 * median(comps) if comps else 0.0,
        "first_wait_s": waits[0] if waits else 0.0,
    }
