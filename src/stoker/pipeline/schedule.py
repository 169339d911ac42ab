"""``Schedule``: where and how wide a loader reads, decided in one place.

A schedule is one small record: the engine (threads or processes), the workers, the prefetch depth
(chunks in flight per worker), the chunk size (batches per worker task) and pinning. One path
makes it and three parties speak it:

1. :func:`decide` makes the loader's schedule at construction, from what the user gave and, where
   the user left a setting to stoker, from the source's cost facts (:class:`Costs`, reported by
   ``BatchSource.costs``) and the machine's usable cores (:func:`usable_cores`: CPU affinity and
   the cgroup quota, counted here and nowhere else);
2. the online controller (``pipeline/autotune.py``) moves workers and prefetch while the loader
   runs when a setting is ``"auto"``;
3. ``stoker tune`` searches settings offline and starts from this schedule.

``loader.schedule`` is the one in force, with who set each field (:attr:`Schedule.set_by`).

The default rules, in order (a given setting always wins):

- **engine**: worker processes when the source's reads hold the GIL (user Python per row: a torch
  Dataset's ``__getitem__``, per-image crops) and more than one core is usable; else threads.
- **workers**: a source whose reads wait on a network (a remote store) gets ``max(2, cores)``; a
  source whose reads only copy rows already in memory (a store gather, token ids) reads batches
  under :data:`INLINE_BYTES` in the consumer's thread (0 workers: a hand-off costs more than the
  copy); any other gets one worker per usable core, worker *threads* of GIL-holding reads at most
  :data:`GIL_THREADS` (they stop scaling, ``docs/design-notes.md``, vision).
- **prefetch**: 2 chunks per worker; **chunk**: about 1 MiB of data, 64 batches at most
  (:func:`chunk_size`); **pin**: on exactly when batches go to a CUDA device.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ENGINES = ("threads", "processes")
INLINE_BYTES = 2**20  # batches of a copying source under this are read in the consumer's thread
GIL_THREADS = 8  # worker threads at most, by default, for reads that hold the GIL
DEFAULT_PREFETCH = 2
CHUNK_BYTES = 2**20  # a worker task's data by default (chunk_size)
CHUNK_BATCHES = 64  # a default chunk's batches at most
YOU, DEFAULT, TUNER = "you", "default", "online tuner"  # the usual values of Schedule.set_by
AUTO = "auto"  # a setting the online tuner moves


def _cgroup_cpus(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs this process's cgroup may use (its quota over its period), or None without a quota."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]  # cgroup v2: "max 100000" or "50000 100000"
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by its cgroup's CPU quota
    (rounded up), at least 1. Read on every call (affinity and quota can change)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_cpus()
    if quota is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


@dataclass(frozen=True)
class Costs:
    """What a source's reads cost, as the source reports it for one batch size.

    Attributes:
        batch_bytes: host bytes of one batch, or None when unknown (sizes the chunks).
        holds_gil: reads run Python per row (a Dataset's ``__getitem__``, per-image crops and
            resampling): worker threads wait for each other's GIL, processes scale.
        copies: reads only copy rows already in memory or mapped (a store gather, cached token ids):
            a small batch costs less than handing it to a worker.
        fetches: reads wait on a network (a remote store's shards): workers pay even for small batches.
    """

    batch_bytes: float | None = None
    holds_gil: bool = False
    copies: bool = False
    fetches: bool = False


@dataclass(frozen=True)
class Schedule:
    """How a loader reads: the record every party (defaults, online tuner, ``stoker tune``) speaks.

    Attributes:
        engine: ``"threads"`` or ``"processes"``.
        workers: workers running the source's ``read`` (0: the consumer's thread reads).
        prefetch: chunks in flight per worker.
        chunk: batches per worker task, or None for about 1 MiB of data (grown 1, 2, 4, ... per pass).
        pin: whether host batches are staged in page-locked memory (CUDA).
        set_by: who set each field: ``"you"``, ``"default"`` (with the rule's reason) or ``"online tuner"``.
    """

    engine: str
    workers: int
    prefetch: int
    chunk: int | None = None
    pin: bool = False
    set_by: dict[str, str] = field(default_factory=dict, compare=False)

    def with_(self, by: str, **changes: Any) -> Schedule:
        """This schedule with ``changes`` applied, recorded as set by ``by``."""
        return replace(self, **changes, set_by={**self.set_by, **dict.fromkeys(changes, by)})

    def keywords(self) -> dict[str, Any]:
        """The loader keywords that give this schedule (``stoker tune``'s settings)."""
        return {
            "engine": self.engine,
            "num_workers": self.workers,
            "prefetch_factor": self.prefetch,
            "chunk_size": self.chunk,
            "pin_memory": self.pin,
        }

    def __str__(self) -> str:
        chunk = "about 1 MiB" if self.chunk is None else f"{self.chunk} batch(es)"
        parts = [
            f"engine {self.engine}",
            f"{self.workers} worker(s)",
            f"prefetch {self.prefetch}",
            f"chunks of {chunk}",
            f"pinned {'yes' if self.pin else 'no'}",
        ]
        keys = ("engine", "workers", "prefetch", "chunk", "pin")
        return "; ".join(f"{p} ({self.set_by[k]})" if k in self.set_by else p for p, k in zip(parts, keys))


def chunk_size(batch_bytes: float | None) -> int:
    """How many consecutive batches one worker task reads by default: about :data:`CHUNK_BYTES` of
    data, :data:`CHUNK_BATCHES` at most, one batch per task when the size of a batch is unknown."""
    if batch_bytes is None:
        return 1
    return int(max(1, min(CHUNK_BATCHES, CHUNK_BYTES // max(batch_bytes, 1))))


def default_engine(costs: Costs, cores: int) -> tuple[str, str]:
    """The engine when the user does not say, and why."""
    if costs.holds_gil and cores > 1:
        return "processes", "default: reads hold the GIL, processes run them in parallel"
    if costs.holds_gil:
        return "threads", "default: one usable core, no process could run beside the consumer"
    return "threads", "default: reads release the GIL"


def default_workers(costs: Costs, engine: str, cores: int) -> tuple[int, str]:
    """The workers when the user does not say, and why."""
    if costs.fetches:
        return max(2, cores), "default: reads wait on the network"
    if costs.copies and (costs.batch_bytes is None or costs.batch_bytes < INLINE_BYTES):
        return 0, "default: batches under 1 MiB are copied in the consumer's thread"
    if costs.holds_gil and engine == "threads" and cores > GIL_THREADS:
        return GIL_THREADS, f"default: threads of GIL-holding reads stop scaling past {GIL_THREADS}"
    return cores, f"default: one per usable core ({cores})"


def decide(
    costs: Costs,
    engine: str | None = None,
    workers: int | str | None = None,
    prefetch: int | str | None = None,
    chunk: int | None = None,
    pin: bool | None = None,
    cuda: bool = False,
    cores: int | None = None,
) -> Schedule:
    """The schedule from the settings given (None: not given; ``"auto"``: the online tuner's, which
    starts from the default and moves it while the loader runs) and, for the others, the default rules
    on ``costs`` and ``cores`` (the usable cores when None). ``pin`` None pins exactly when ``cuda``."""
    cores = usable_cores() if cores is None else cores
    by: dict[str, str] = {}
    if engine is None:
        engine, by["engine"] = default_engine(costs, cores)
    else:
        by["engine"] = YOU
    if workers in (None, AUTO):
        tuned = workers == AUTO
        workers, why = default_workers(costs, engine, cores)
        by["workers"] = TUNER if tuned else why  # the tuner starts from the default
    else:
        by["workers"] = YOU
    by["prefetch"] = TUNER if prefetch == AUTO else DEFAULT if prefetch is None else YOU
    by["chunk"] = DEFAULT if chunk is None else YOU
    by["pin"] = "default: on exactly for CUDA" if pin is None else YOU
    return Schedule(
        engine,
        int(workers),
        DEFAULT_PREFETCH if prefetch in (None, AUTO) else int(prefetch),
        chunk,
        cuda if pin is None else bool(pin),
        by,
    )


__all__ = [
    "Costs",
    "DEFAULT_PREFETCH",
    "ENGINES",
    "GIL_THREADS",
    "INLINE_BYTES",
    "Schedule",
    "chunk_size",
    "decide",
    "default_engine",
    "default_workers",
    "usable_cores",
]
