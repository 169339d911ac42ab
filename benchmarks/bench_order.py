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
    python benchmarks/bench_order.py --in-batch STORE --batch-size 512 [--rounds 15]

``--in-batch`` times ``Store.gather`` of the same shuffled batches of every tensor column, in the
sampler's order and sorted (``in_batch_order="storage"``), into two alternating preallocated buffers
(what a loader does), the two taking turns each round; it prints the medians of CPU and wall time
per batch and of the per-round rate ratios (sampled / storage). CPU time is the steadier figure on
a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

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


def in_batch(path: str, batch_size: int, rounds: int, batches: int = 100) -> None:
    import statistics

    import stoker

    store = stoker.open(path)
    cols = [c for c in store.schema if store.schema[c].kind == "tensor"]
    perm = np.random.default_rng(0).permutation(len(store))
    chunks = [perm[i * batch_size : (i + 1) * batch_size] for i in range(min(batches, len(store) // batch_size))]
    orders = {"storage": [np.sort(b) for b in chunks], "sampled": chunks}
    shapes = {c: ((batch_size, *store.schema[c].row_shape), store.schema[c].numpy_dtype) for c in cols}
    outs = [{c: np.empty(*shapes[c]) for c in cols} for _ in range(2)]
    cpu: dict[str, list[float]] = {k: [] for k in orders}
    wall: dict[str, list[float]] = {k: [] for k in orders}
    for r in range(rounds):
        for name in list(orders)[:: 1 if r % 2 else -1]:
            c0, w0 = time.process_time(), time.perf_counter()
            for i, rows in enumerate(orders[name]):
                store.gather(rows, cols, outs[i & 1])
            cpu[name].append((time.process_time() - c0) / len(chunks) * 1e3)
            wall[name].append((time.perf_counter() - w0) / len(chunks) * 1e3)
    print(
        f"{path}: {len(store.manifest.shards)} shards, columns {cols}, {len(chunks)} batches of {batch_size}, {rounds} rounds"
    )
    for name in orders:
        print(
            f"  {name:8s} CPU ms/batch {statistics.median(cpu[name]):7.3f}  wall {statistics.median(wall[name]):7.3f}"
        )
    for what, t in (("CPU", cpu), ("wall", wall)):
        ratios = sorted(a / b for a, b in zip(t["storage"], t["sampled"]))
        print(
            f"  sampled / storage rate, {what}: median {statistics.median(ratios):.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10**7, 10**8])
    parser.add_argument("--case", nargs=3, metavar=("ROWS", "ORDER", "CONTENDER"), help=argparse.SUPPRESS)
    parser.add_argument("--in-batch", metavar="STORE", help="time a store's gathers in sampled against storage order")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if args.in_batch:
        in_batch(args.in_batch, args.batch_size, args.rounds)
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
