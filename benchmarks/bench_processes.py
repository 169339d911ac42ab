"""The process engine's Dataset path: batches written into shared-memory slots and handed out with no
copy (issue 14 part 2), against the engine before it, which wrote each batch into a fresh /dev/shm
segment that the consumer opened, unlinked and copied out.

Contenders, each reading the same map-style torch Dataset (``__getitem__`` returns one sample,
the default collate stacks them) with 2 worker processes and 4 batches in flight:
  slots        stoker.pipeline.processes.ProcessPool as it is now (the loader's process engine)
  copy (old)   the ProcessPool of commit OLD (loaded from git: the code before the slots)
  Loader       stoker.Loader(dataset, engine="processes", persistent_workers=True): the slots plus
               the loader around them; its DatasetSource stacks samples straight into the slot
               (the two pools above stack with default_collate, and the new one then copies the
               batch into its slot)
  DataLoader   torch.utils.data.DataLoader(num_workers=2, prefetch_factor=2, persistent_workers=True),
               for reference
The pools and the loaders keep their worker processes between passes (a pass is 40 batches), so
what is timed is the hand-off, not starting processes.
The consumer turns every array into a tensor (``torch.from_numpy``, as the loader does) and reads
one value of it. Workloads: small samples (uint8 3x32x32, batches of 256, 0.8 MB) and large ones
(float32 3x128x128, batches of 64, 12.6 MB). Rounds interleave the contenders; the medians are
printed, with the ratio to ``copy (old)``.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_processes.py [--rounds 3] [--seconds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
import stoker  # noqa: E402
from common import Result, machine, print_table, rate  # noqa: E402
from stoker.pipeline.collate import default_collate, fetch, flatten  # noqa: E402
from stoker.pipeline.processes import ProcessPool  # noqa: E402

OLD = "756109f"  # the last commit before the shared-memory slots
ROOT = Path(__file__).resolve().parent.parent


def old_pool_class() -> type:
    """``ProcessPool`` as it was at commit OLD, with the segments module of that commit."""

    def load(name: str, path: str, replace: tuple[str, str] | None = None) -> types.ModuleType:
        src = subprocess.run(
            ["git", "show", f"{OLD}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        if replace:
            src = src.replace(*replace)
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(src, f"{OLD}:{path}", "exec"), module.__dict__)
        return module

    load("old_segments", "src/stoker/pipeline/segments.py")
    old = load(
        "old_processes",
        "src/stoker/pipeline/processes.py",
        ("from stoker.pipeline.segments import", "from old_segments import"),
    )
    return old.ProcessPool


class Samples(torch.utils.data.Dataset):
    """``n`` samples of ``shape``/``dtype`` (cut from one preallocated array) and an int label."""

    def __init__(self, n: int, shape: tuple[int, ...], dtype: Any) -> None:
        self.n = n
        self.data = (np.arange(64 * int(np.prod(shape))) % 251).astype(dtype).reshape(64, *shape)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return self.data[i % 64], i


class FetchCollate:
    """One task: the samples of a batch of indices, collated."""

    def __init__(self, dataset: Samples) -> None:
        self.dataset = dataset

    def __call__(self, indices: list[int]) -> Any:
        return default_collate(fetch(self.dataset, indices))


def consume(batch: Any) -> int:
    """What the loader does with a batch (tensors over the arrays), plus reading one value."""
    leaves, _ = flatten(batch)
    tensors = [torch.from_numpy(x) if isinstance(x, np.ndarray) else x for x in leaves]
    return int(tensors[0].reshape(-1)[0]) * 0 + len(tensors[1])


def pooled(pool_class: type, dataset: Samples, batch: int) -> Callable[[], Iterable[Any]]:
    pool = pool_class(FetchCollate(dataset), 2, "bench")
    batches = [list(range(s, s + batch)) for s in range(0, len(dataset) - batch + 1, batch)]

    def one_pass() -> Iterable[Any]:
        return pool.map(batches, depth=4)

    one_pass.pool = pool  # type: ignore[attr-defined]
    return one_pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    workloads = {
        "small uint8 3x32x32 x256": (Samples(256 * 40, (3, 32, 32), np.uint8), 256),
        "large float32 3x128x128 x64": (Samples(64 * 40, (3, 128, 128), np.float32), 64),
    }
    old_pool = old_pool_class()
    print(machine())
    results: list[Result] = []
    for name, (dataset, batch) in workloads.items():
        nbytes = int(dataset.data[0].nbytes) * batch
        makers: dict[str, Callable[[], Iterable[Any]]] = {
            "slots": pooled(ProcessPool, dataset, batch),
            "copy (old)": pooled(old_pool, dataset, batch),
        }
        loader = stoker.Loader(
            dataset, batch_size=batch, num_workers=2, prefetch_factor=2, engine="processes", persistent_workers=True
        )
        makers["Loader"] = lambda loader=loader: loader
        torch_loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch, num_workers=2, prefetch_factor=2, persistent_workers=True
        )
        makers["DataLoader"] = lambda torch_loader=torch_loader: torch_loader
        rates: dict[str, list[float]] = {k: [] for k in makers}
        for _ in range(args.rounds):
            for contender, make in makers.items():
                per_s, _ = rate(make, lambda b, batch=batch: batch if consume(b) >= 0 else 0, seconds=args.seconds)
                rates[contender].append(per_s)
        for make in makers.values():
            pool = getattr(make, "pool", None)
            if pool is not None:
                pool.close()
        loader.close()
        del torch_loader
        for contender, values in rates.items():
            median = statistics.median(values)
            results.append(
                Result(name, contender, median, median * nbytes / batch / 1e6, {"rounds": [round(v) for v in values]})
            )
    print_table(results, baseline="copy (old)")


if __name__ == "__main__":
    main()
