"""Growing chunks (1, 2, 4, ... batches per read, re-sized per chunk) against fixed chunks, side by side.

Before: the loader's chunk size was fixed for a pass from the source's ``batch_bytes`` at its start;
a text source tokenizing on the fly (its lengths still being learned) gave None, so one batch per
read for the whole first epoch. After: chunks grow from one batch and follow ``batch_bytes`` as it
becomes known (``pipeline/executor.py``: ``pass_tasks``).

Data: 100k short real lines (bench_text.py's corpus: the Friends lines, then 20 Newsgroups test
sentences), bert-base-uncased, max_length=128, batches of 32, shuffled (bucketed), CPU tensors.
Per round and contender: ``stoker.text.Loader`` built, its first batch, the rest of its first epoch
(time from construction), then a second epoch (token cache full). Rounds alternate which contender
goes first; medians and after/before ratios are printed.

    flock /tmp/stoker-bench.lock python benchmarks/bench_chunks.py [--data data] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
import stoker.loader  # noqa: E402
import stoker.text  # noqa: E402
from bench_text import hundred_k_lines  # noqa: E402
from stoker.pipeline.executor import chunk_size, chunked, pass_tasks  # noqa: E402


def fixed_tasks(epoch, batches, batch_bytes):
    """The chunking before: one size for the whole pass, from batch_bytes at its start."""
    per_chunk = chunk_size(batch_bytes())
    return per_chunk, ((epoch, k * per_chunk, chunk) for k, chunk in enumerate(chunked(batches, per_chunk)))


CONTENDERS = {"fixed (before)": fixed_tasks, "growing (after)": pass_tasks}


def one_round(texts: list[str], tasks) -> dict[str, float]:
    stoker.loader.pass_tasks = tasks  # what Loader._pass calls
    t0 = time.perf_counter()
    loader = stoker.text.Loader(texts, batch_size=32, max_length=128, shuffle=True, progress=False)
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    n = 1 + sum(1 for _ in it)
    cold = time.perf_counter() - t0
    t1 = time.perf_counter()
    m = sum(1 for _ in loader)
    later = time.perf_counter() - t1
    loader.close()
    assert n == m == len(loader)
    return {"first batch": first, "first epoch": cold, "second epoch": later}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    texts = hundred_k_lines(Path(args.data) / "text")
    print(f"{len(texts):,} lines, {args.rounds} rounds alternating", flush=True)
    times: dict[str, dict[str, list[float]]] = {c: {} for c in CONTENDERS}
    one_round(texts[:2000], pass_tasks)  # imports and tokenizer loading out of the way
    names = list(CONTENDERS)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            for key, value in one_round(texts, CONTENDERS[name]).items():
                times[name].setdefault(key, []).append(value)
        print(f"round {r + 1}: " + "; ".join(f"{n} {times[n]['first epoch'][-1]:.2f} s" for n in names), flush=True)
    stoker.loader.pass_tasks = pass_tasks
    before, after = names
    for key in times[before]:
        b, a = statistics.median(times[before][key]), statistics.median(times[after][key])
        print(f"{key:>13}: before {b:7.3f} s   after {a:7.3f} s   after/before {a / b:.2f}x")


if __name__ == "__main__":
    main()
