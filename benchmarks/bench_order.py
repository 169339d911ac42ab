"""Epoch start of the sampler's orders: time and memory per row, block against global order; and
(``--in-batch STORE``) the cost of rows inside a batch in the sampler's order against storage order.

Each case runs in a fresh Python process (``--case``), so no case inherits another's memory or
warm caches. A case builds the default batch sampler of one rank of 8 and takes its first batch
(what ``iter(loader)`` does before the first read) for epoch 1, the first in the process, and for
epoch 2: the times of those, and the memory allocated at its peak (tracemalloc, which numpy
reports to) and the growth of peak RSS, per row of the store.

``before`` is the order as built up to commit 53119eb: the whole epoch's global order as one
int64 array (block order through a per-row lexsort), then this rank's share of it. It runs at
10**7 rows only: at 10**8 it needs about 4 GB.

    python benchmarks/bench_order.py                 # 10**7 and 10**8 rows
    python benchmarks/bench_order.py --rows 10000000
    python benchmarks/bench_order.py --in-batch STORE --batch-size 512 [--rounds 15] [--baseline GATHER_PY]
    python benchmarks/bench_order.py --in-batch STORE --batch-size 512 --loader

``--in-batch`` times ``Store.gather`` of the same shuffled batches of every tensor column, in the
sampler's order and sorted (``in_batch_order="storage"``), into two alternating preallocated buffers
(what a loader does), the contenders taking turns each round; ``--baseline GATHER_PY`` adds both
orders of another ``store/gather.py`` (e.g. main's, ``git show main:src/stoker/store/gather.py``)
run in ``Store.gather``'s place, and rates are then relative to its storage order. It prints the
1-minute load average over the run and, per contender, the median [quartiles] of the CPU time (this
thread's) and wall time per batch and of the per-round rate ratios. CPU time is the steadier figure
on a loaded machine. With ``--loader`` it times whole batches of ``stoker.Loader`` in the two orders
instead (:func:`in_batch_loader`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

BATCH, WORLD, RANK = 256, 8, 3


def _before(n: int, order: str, seed: int, epoch: int, block_size: int = 4096, window: int = 16) -> np.ndarray:
    """The pre-53119eb epoch start: the whole global order, then this rank's contiguous share."""
    rng = np.random.default_rng([seed, epoch])
    if order == "global":
        full = rng.permutation(n).astype(np.int64, copy=False)
    else:
        num_blocks = -(-n // block_size)
        blocks = rng.permutation(num_blocks).astype(np.int64)
        starts = blocks * block_size
        lengths = np.minimum(block_size, n - starts)
        ends = np.cumsum(lengths)
        rows = np.repeat(starts - (ends - lengths), lengths) + np.arange(n, dtype=np.int64)
        window_of_row = np.repeat(np.arange(num_blocks) // window, lengths)
        full = rows[np.lexsort((rng.random(n), window_of_row))]
    per_rank = -(-n // WORLD)
    return full[RANK * per_rank : (RANK + 1) * per_rank][:BATCH]


def case(rows: int, order: str, contender: str) -> dict[str, float]:
    from stoker.pipeline.sampler import FixedBatches, Sampler

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    sampler = FixedBatches(Sampler(rows, order, 0, rank=RANK, world_size=WORLD), BATCH)
    seconds = []
    for epoch in (1, 2):  # the first in the process, then the next epoch's start
        t0 = time.perf_counter()
        first = _before(rows, order, 0, epoch) if contender == "before" else next(sampler.batches(epoch))
        seconds.append(time.perf_counter() - t0)
        assert len(first) == BATCH
        del first
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss) * 1024
    return {"first": seconds[0], "next": seconds[1], "bytes_per_row": peak / rows, "rss_bytes_per_row": rss / rows}


def _gather_with(module: Any, store: Any, cols: list[str]) -> Callable[[np.ndarray, dict], Any]:
    """``Store.gather``'s body (checks, plan, shards, columns) run with another ``gather`` module."""
    starts, n = store.shard_starts, len(store)

    def gather(idx: np.ndarray, out: dict) -> Any:
        ascending = module.ascending_order(idx)
        if (idx[0] < 0 or idx[-1] >= n) if ascending else (idx.min() < 0 or idx.max() >= n):
            raise IndexError("row out of range")
        plan = module.Plan(idx, starts, ascending)
        shards = {s: store._cache.get(s) for s, _ in plan.runs}  # what its Store.gather did
        return module.gather_columns(store.schema, cols, shards, plan, out)

    return gather


def _quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"{statistics.median(values):.3f} [{q[0]:.3f}-{q[2]:.3f}]"


def in_batch(path: str, batch_size: int, rounds: int, baseline: str | None, batches: int = 60) -> None:
    """Per-batch CPU (this thread's) and wall time of each contender, interleaved: every round runs
    each contender over the same batches, in turn, the turn order reversed every other round."""
    import stoker

    store = stoker.open(path)
    cols = [c for c in store.schema if store.schema[c].kind == "tensor"]
    perm = np.random.default_rng(0).permutation(len(store))
    chunks = [perm[i * batch_size : (i + 1) * batch_size] for i in range(min(batches, len(store) // batch_size))]
    ordered = [np.sort(b) for b in chunks]
    shapes = {c: ((batch_size, *store.schema[c].row_shape), store.schema[c].numpy_dtype) for c in cols}
    outs = [{c: np.empty(*shapes[c]) for c in cols} for _ in range(2)]

    def gather(idx: np.ndarray, out: dict) -> Any:
        return store.gather(idx, cols, out)

    runs: dict[str, tuple[Callable[[np.ndarray, dict], Any], list[np.ndarray]]] = {
        "storage": (gather, ordered),
        "sampled": (gather, chunks),
    }
    if baseline:  # e.g. git show main:src/stoker/store/gather.py > /tmp/gather_main.py
        spec = importlib.util.spec_from_file_location("baseline_gather", baseline)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        old = _gather_with(module, store, cols)
        runs = {"baseline storage": (old, ordered), "baseline sampled": (old, chunks), **runs}
    for name, (run, rows) in runs.items():  # the same rows, whichever way they are read
        for c in cols:
            got, want = run(rows[0], outs[0])[c], store[rows[0]][c]
            if not np.array_equal(got, want):
                raise AssertionError(f"{name} gathered other rows of {c}")
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    wall: dict[str, list[float]] = {k: [] for k in runs}
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        for name in list(runs)[:: 1 if r % 2 else -1]:
            run, rows = runs[name]
            c0, w0 = time.thread_time(), time.perf_counter()
            for i, b in enumerate(rows):
                run(b, outs[i & 1])
            cpu[name].append((time.thread_time() - c0) / len(rows) * 1e3)
            wall[name].append((time.perf_counter() - w0) / len(rows) * 1e3)
        loads.append(os.getloadavg()[0])
    ref = "baseline storage" if baseline else "storage"
    print(
        f"{path}: {store.num_shards} shards, columns {cols}, {len(chunks)} batches of {batch_size}, {rounds} rounds, "
        f"1-min load {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"  ms per batch and rate vs {ref} (per-round ratios): median [quartiles]")
    for name in runs:
        ratios = {k: [a / b for a, b in zip(t[ref], t[name])] for k, t in (("cpu", cpu), ("wall", wall))}
        print(
            f"  {name:17s} CPU {_quartiles(cpu[name])} = {_quartiles(ratios['cpu'])}x   "
            f"wall {_quartiles(wall[name])} = {_quartiles(ratios['wall'])}x"
        )


def in_batch_loader(path: str, batch_size: int, rounds: int, batches: int = 40) -> None:
    """``stoker.Loader`` over the store with ``in_batch_order="sampled"`` (the default) and
    ``"storage"``: each loader built once and warmed by a whole epoch, then every round the first
    ``batches`` batches of a new ``iter()`` of each, turns reversed every other round; process CPU
    time (all threads) and wall time per batch, rates vs storage order."""
    import stoker

    loaders = {
        order: stoker.Loader(stoker.open(path), batch_size=batch_size, shuffle=True, in_batch_order=order)
        for order in ("storage", "sampled")
    }
    for loader in loaders.values():
        for _ in loader:
            pass
    cpu: dict[str, list[float]] = {k: [] for k in loaders}
    wall: dict[str, list[float]] = {k: [] for k in loaders}
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        for order in list(loaders)[:: 1 if r % 2 else -1]:
            it = iter(loaders[order])
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(batches):
                next(it)
            cpu[order].append((time.process_time() - c0) / batches * 1e3)
            wall[order].append((time.perf_counter() - w0) / batches * 1e3)
            del it
        loads.append(os.getloadavg()[0])
    print(
        f"{path}: stoker.Loader, batches of {batch_size}, {rounds} rounds x {batches} batches, "
        f"1-min load {min(loads):.1f}-{max(loads):.1f}; ms per batch and rate vs storage: median [quartiles]"
    )
    for order in loaders:
        ratios = {k: [a / b for a, b in zip(t["storage"], t[order])] for k, t in (("cpu", cpu), ("wall", wall))}
        print(
            f"  {order:8s} CPU {_quartiles(cpu[order])} = {_quartiles(ratios['cpu'])}x   "
            f"wall {_quartiles(wall[order])} = {_quartiles(ratios['wall'])}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10**7, 10**8])
    parser.add_argument("--case", nargs=3, metavar=("ROWS", "ORDER", "CONTENDER"), help=argparse.SUPPRESS)
    parser.add_argument("--in-batch", metavar="STORE", help="time a store's gathers in sampled against storage order")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", metavar="GATHER_PY", help="--in-batch: also time this gather.py's two orders")
    parser.add_argument("--loader", action="store_true", help="--in-batch: time whole stoker.Loader batches instead")
    args = parser.parse_args()
    if args.in_batch and args.loader:
        in_batch_loader(args.in_batch, args.batch_size, args.rounds)
        return
    if args.in_batch:
        in_batch(args.in_batch, args.batch_size, args.rounds, args.baseline)
        return
    if args.case:
        print(json.dumps(case(int(args.case[0]), args.case[1], args.case[2])))
        return
    print(f"epoch start: one rank of {WORLD}, first batch of {BATCH}; a fresh process per case")
    print(
        f"{'rows':>12} {'order':>7} {'contender':>9} {'first s':>9} {'next s':>9} {'B/row':>8} {'RSS B/row':>10} "
        f"{'next vs before':>15}"
    )
    for rows in args.rows:
        for order in ("block", "global"):
            got = {}
            for contender in ("before", "stoker") if rows <= 10**7 else ("stoker",):
                cmd = [sys.executable, __file__, "--case", str(rows), order, contender]
                got[contender] = r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
                ratio = f"{got['before']['next'] / r['next']:.0f}x" if "before" in got and contender != "before" else ""
                print(
                    f"{rows:>12,} {order:>7} {contender:>9} {r['first']:>9.4f} {r['next']:>9.4f} "
                    f"{r['bytes_per_row']:>8.3f} {r['rss_bytes_per_row']:>10.3f} {ratio:>15}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
