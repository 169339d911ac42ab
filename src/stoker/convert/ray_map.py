"""The driver's side of a Ray conversion (``on_ray.py``): Ray imported, the cluster's task slots
counted, and one Ray task run per partition with its failures turned into errors.

:func:`run_map` runs ``fn(row, job)`` (a task of ``ray_tasks.py``) once per partition as a Ray task
declaring ``cpus`` Ray CPUs, retried ``retries`` times after its worker dies (plain Ray tasks, not a Ray
Data map: docs/guides/cluster.md says why). A partition's own StokerError, sent back pickled by its
task, is raised as itself; Ray failing (a worker that died every attempt) is raised as a WorkerError
naming the partition. Both say how many partitions finished and are kept in the staging directory for a
re-run.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

from stoker.convert.partitions import attempts, done_parts, part_name
from stoker.convert.ray_tasks import note
from stoker.errors import ConfigError, WorkerError

__all__ = ["collected", "ray_module", "run_map", "slots"]


def ray_module() -> Any:
    """The ``ray`` module; a ConfigError naming the extra when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"stoker.convert.on_ray needs Ray: pip install 'stoker[ray]' ({exc})", option="on_ray"
        ) from exc
    return ray


def slots(ray: Any, cpus_per_task: int) -> int:
    """Tasks the cluster runs at once (starting a local Ray when none is connected)."""
    if not ray.is_initialized():
        ray.init()
    return max(1, int(ray.cluster_resources().get("CPU", 1)) // cpus_per_task)


def run_map(
    ray: Any,
    fn: Any,
    indices: list[int],
    job: dict[str, Any],
    cpus: int,
    retries: int,
    staging: Path,
    src: Any,
    dest: Any,
) -> dict[int, Any]:
    """``fn({"index": i}, job)`` for every partition ``i`` in ``indices``, as Ray tasks; index -> what it returned.

    ``job`` is put in Ray's object store once and handed to every task by reference. The first task to fail
    (its worker dead ``retries + 1`` times) cancels the tasks not finished, which are awaited before the
    WorkerError is raised: the finished partitions are settled and kept.
    """
    task = ray.remote(num_cpus=cpus, max_retries=retries)(fn)
    shared = ray.put(job)
    index = {task.remote({"index": i}, shared): i for i in indices}
    pending = list(index)
    rows: list[dict[str, Any]] = []
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        try:
            rows.append(ray.get(done[0]))
        except Exception as exc:  # noqa: BLE001 - a worker that died, or Ray failing: a WorkerError naming the partition
            for ref in pending:
                ray.cancel(ref)
            ray.wait(pending, num_returns=len(pending), timeout=60)
            raise _failure(exc, index[done[0]], indices, staging, retries, src, dest) from exc
    rows.sort(key=lambda r: int(r["index"]))
    failed = [r for r in rows if r["error"]]
    if failed:  # a partition's own StokerError (pickled by the task, as Ray pickles all it sends)
        error = pickle.loads(failed[0]["error"])
        note(error, f"in the Ray conversion of {src} into {dest}: {_resume(indices, staging)}")
        raise error
    return {int(r["index"]): json.loads(r["result"]) for r in rows}


def collected(staging: Path, indices: list[int], began: float) -> tuple[list[dict[str, Any]], dict[int, list[float]]]:
    """What each partition of ``indices`` reported (its marker), and each task's start and end in seconds since
    ``began`` (the map's start, wall clock; partitions reused from an earlier run have none)."""
    summaries = [json.loads((staging / f"{part_name(i)}.json").read_text(encoding="utf-8")) for i in indices]
    windows = {i: [w - began for w in s["window"]] for i, s in zip(indices, summaries, strict=True) if "window" in s}
    return summaries, windows


def _resume(indices: list[int], staging: Path) -> str:
    done = len(done_parts(staging, indices))
    return (
        f"{done} of {len(indices)} partitions finished and are kept in {staging}; "
        "run the same call again to convert only the rest"
    )


def _failure(
    exc: BaseException, failed: int, indices: list[int], staging: Path, retries: int, src: Any, dest: Any
) -> Exception:
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return WorkerError(
        f"the Ray conversion of {src} into {dest} stopped: partition(s) [{failed}] failed "
        f"{attempts(staging, failed)} time(s) ({type(exc).__name__}: {first}); {_resume(indices, staging)}",
        stage=f"ray partition {failed}",
    )
