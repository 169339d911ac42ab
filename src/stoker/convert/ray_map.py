"""The driver's side of a Ray conversion (``on_ray.py``): Ray Data imported, the cluster's task
slots counted, and one Ray Data map run over partitions with its failures turned into errors.

:func:`run_map` runs ``fn(row, job)`` (a task of ``ray_tasks.py``) once per partition as one Ray
Data map, each task declaring ``cpus`` Ray CPUs and retried ``retries`` times after its worker
dies. A partition's own StokerError, sent back pickled by its task, is raised as itself; Ray
failing (a worker that died every attempt) is raised as a WorkerError naming the partition. Both
say how many partitions finished and are kept in the staging directory for a re-run.
"""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path
from typing import Any

from stoker.convert.partitions import attempts, done_parts, part_name
from stoker.convert.ray_tasks import note
from stoker.errors import ConfigError, WorkerError

__all__ = ["collected", "ray_data", "run_map", "slots"]


def ray_data() -> Any:
    """The ``ray`` module with Ray Data imported; a ConfigError naming the extra when it is missing."""
    try:
        import ray.data  # binds ray as well
    except ImportError as exc:
        raise ConfigError(
            f"stoker.convert.on_ray needs Ray Data: pip install 'stoker[ray]' ({exc})", option="on_ray"
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
    """``fn(index, job)`` for every partition in ``indices``, as one Ray Data map; index -> what it returned."""
    items = [{"index": i} for i in indices]
    context = ray.data.DataContext.get_current()
    bars = context.enable_progress_bars
    context.enable_progress_bars = False
    try:
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        with warnings.catch_warnings():  # max_retries has no named parameter yet (Ray Data's default: retry forever)
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
            mapped = ds.map(fn, fn_kwargs={"job": job}, num_cpus=cpus, max_retries=retries)
        rows = mapped.take_all()
    except Exception as exc:  # noqa: BLE001 - a worker that died, or Ray failing: a WorkerError naming the partition
        raise _failure(exc, indices, staging, retries, src, dest) from exc
    finally:
        context.enable_progress_bars = bars
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


def _failure(exc: BaseException, indices: list[int], staging: Path, retries: int, src: Any, dest: Any) -> Exception:
    unfinished = [i for i in indices if i not in set(done_parts(staging, indices))]
    resume = _resume(indices, staging)
    dead = [i for i in unfinished if attempts(staging, i) > retries] or unfinished
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return WorkerError(
        f"the Ray conversion of {src} into {dest} stopped: partition(s) {dead} failed "
        f"{retries + 1} time(s) ({type(exc).__name__}: {first}); {resume}",
        stage=f"ray partition {dead[0] if dead else '?'}",
    )
