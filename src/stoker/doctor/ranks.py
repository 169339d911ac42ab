"""Many ranks in one report: ``stoker doctor -- torchrun --nproc_per_node N train.py``.

Under torchrun (or ``python -m torch.distributed.run``) every rank is a child of the launcher,
instrumented like any Python process of the command; each records its ``RANK`` (``Meta.rank``),
and a worker process belongs to the rank it descends from. :func:`rank_table` gives one row per
rank: its data wait, compute, its slowest stage and the CPU its processes used; :func:`straggler`
names the rank the others wait for. Under DDP a rank late with its data holds every rank's
gradient all-reduce, so the others' wait shows in their *compute* (time between fetches), and
the straggler is the rank whose data wait is far above the rest's.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import Any

from stoker.doctor.analysis import LoaderStats, step_stats
from stoker.doctor.events import Meta
from stoker.doctor.stalls import Stall

STRAGGLER_RATIO, STRAGGLER_FLOOR_S, STRAGGLER_SHARE = 3.0, 0.2, 0.1


def rank_of(pid: int, procs: dict[int, Meta]) -> int | None:
    """The rank ``pid`` runs as or descends from (None: not under a distributed launcher)."""
    seen: set[int] = set()
    while pid in procs and pid not in seen:
        seen.add(pid)
        meta = procs[pid]
        if meta.rank is not None:
            return meta.rank
        pid = meta.ppid if meta.ppid is not None else -1
    return None


def ranks_of(procs: dict[int, Meta]) -> dict[int, int]:
    """pid -> rank for every recorded process under a rank."""
    out = {pid: rank_of(pid, procs) for pid in procs}
    return {pid: r for pid, r in out.items() if r is not None}


def _cpu_cores(pids: set[int], samples: list[dict[str, Any]]) -> float | None:
    """Cores the processes ``pids`` kept busy between the first and last sample that saw them."""
    first: dict[int, tuple[float, float]] = {}
    last: dict[int, tuple[float, float]] = {}
    for s in samples:
        for row in s.get("mem", ()):
            if row[0] in pids and len(row) > 3:
                first.setdefault(row[0], (s["t"], row[3]))
                last[row[0]] = (s["t"], row[3])
    if not first:
        return None
    t0 = min(t for t, _ in first.values())
    t1 = max(t for t, _ in last.values())
    busy = sum(last[p][1] - first[p][1] for p in first)
    return busy / (t1 - t0) if t1 > t0 else None


def rank_table(
    loaders: dict[str, LoaderStats], procs: dict[int, Meta], samples: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per rank (empty when no loader ran under a rank), in rank order."""
    ranks = ranks_of(procs)
    by_rank: dict[int, list[LoaderStats]] = defaultdict(list)
    for st in loaders.values():
        if st.pid in ranks:
            by_rank[ranks[st.pid]].append(st)
    rows = []
    for rank in sorted(by_rank):
        sts = by_rank[rank]
        stats = [step_stats(st) for st in sts]
        wait, compute = sum(s["wait_s"] for s in stats), sum(s["compute_s"] for s in stats)
        table = [row for st in sts for row in st.stage_table()]
        top = max(table, key=lambda r: r["total_s"], default=None)
        pids = {pid for pid, r in ranks.items() if r == rank}
        rows.append(
            {
                "rank": rank,
                "pid": min(st.pid for st in sts),
                "steps": sum(s["steps"] for s in stats),
                "wait_s": wait,
                "compute_s": compute,
                "wait_share": wait / (wait + compute) if wait + compute > 0 else 0.0,
                "stage": top["stage"] if top else "",
                "stage_ms": top["ms_per_call"] if top else None,
                "stage_unit": top.get("unit", "call") if top else "",
                "cpu_cores": _cpu_cores(pids, samples),
            }
        )
    return rows


def straggler(rows: list[dict[str, Any]]) -> Stall | None:
    """The rank whose data wait is ``STRAGGLER_RATIO`` x the others' median, and a real share of its loop."""
    if len(rows) < 2:
        return None
    slow = max(rows, key=lambda r: r["wait_s"])
    others = [r for r in rows if r is not slow]
    typical = median(r["wait_s"] for r in others)
    if (
        slow["wait_s"] < STRAGGLER_FLOOR_S
        or slow["wait_share"] < STRAGGLER_SHARE
        or slow["wait_s"] < STRAGGLER_RATIO * typical
    ):
        return None
    stage = (
        f"; its slowest stage: {slow['stage']} {slow['stage_ms']:.1f} ms per {slow['stage_unit']}"
        if slow["stage"]
        else ""
    )
    cpu = f"; its processes kept {slow['cpu_cores']:.2f} cores busy" if slow["cpu_cores"] is not None else ""
    compute = median(r["compute_s"] for r in others)
    return Stall(
        "straggler_rank",
        f"rank {slow['rank']}",
        f"straggler: rank {slow['rank']} waits on data {slow['wait_s']:.2f} s ({100 * slow['wait_share']:.0f} % "
        f"of its loop) against {typical:.2f} s (median) on the other ranks{stage}{cpu}; the other ranks wait for it inside "
        f"their steps (their compute {compute:.2f} s against its {slow['compute_s']:.2f} s)",
        f"give rank {slow['rank']} what the others have: its shard on the same disk and of the same size "
        "(DistributedSampler splits rows evenly; a skewed IterableDataset shard does not); more workers for its "
        "DataLoader where its stage is CPU-bound",
        "stoker.Loader(store, ...) under torchrun splits every epoch's rows evenly over the ranks; put the store "
        "on each node's local disk (or a remote store with its shard cache there)",
    )
