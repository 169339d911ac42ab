"""What an epoch costs per engine on short epochs: a fork per epoch (processes) against threads.

An ``ImageSource`` over an encoded store of the real photos (``data/images/photos``, 1,224 JPEGs),
batches of 32, default worker count, in one process. Configurations:
  processes     no engine given: the source's default (worker processes where > 1 core is usable),
                persistent_workers=False, so every pass forks a new pool
  threads       engine="threads"
  persistent    the default engine with persistent_workers=True, timed from its 2nd epoch on
Measurements (seconds, medians over rounds; each round runs every configuration, rotated order):
  A  epochs of 64, 256 and 1,224 rows (``stoker.Subset`` of the first rows), with training
     transforms (RandomResizedCrop(224) + flip) and validation ones (Resize(256) + CenterCrop(224)):
     time from ``iter(loader)`` to the first batch, to the end of the epoch, and from the last
     batch to that end ("end": the pool's teardown)
  B  a pass stopped by ``break`` after 2 batches (256 rows, training), then a new whole pass:
     the time of each (the break's time includes dropping the iterator)
  C  the same 256-row training epoch 5 times on one loader: each epoch's time
The loader is built outside the timings (a user builds it once and iterates it every epoch).

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_epochs.py [--data data] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

BATCH = 32
SIZES = (64, 256, 1224)
CONFIGS = ("processes", "threads", "persistent")


def make_loader(store: str, rows: int, config: str, train: bool) -> Any:
    import stoker
    from stoker import vision

    tf = vision.train_transforms(224, normalize=False) if train else vision.eval_transforms(224, normalize=False)
    source = stoker.Subset(vision.ImageSource(store, tf), range(rows))
    options: dict[str, Any] = {"engine": "threads"} if config == "threads" else {}
    if config == "persistent":
        options["persistent_workers"] = True
    loader = stoker.Loader(source, batch_size=BATCH, shuffle=train, **options)
    if config == "persistent":
        for _ in loader:  # epoch 1 starts the pool; the timings are of epochs 2+
            pass
    return loader


def epoch(loader: Any, stop: int | None = None) -> tuple[float, float, float]:
    """(time to the first batch, time to the end or to the ``stop``-th batch and the iterator dropped,
    time from the last batch handed out to that end: the pass's teardown)."""
    t0 = time.perf_counter()
    first = last = 0.0
    it = iter(loader)
    for i, _batch in enumerate(it):
        last = time.perf_counter() - t0
        if i == 0:
            first = last
        if stop is not None and i + 1 == stop:
            break
    del it, _batch
    total = time.perf_counter() - t0
    return first, total, total - last


def one_round(store: str, order: tuple[str, ...], out: dict[str, list[float]]) -> None:
    for train in (True, False):
        for rows in SIZES:
            for config in order:
                loader = make_loader(store, rows, config, train)
                first, total, tail = epoch(loader)
                key = f"A {'train' if train else 'val'} {rows:>4} {config}"
                out[key + " first"].append(first)
                out[key + " epoch"].append(total)
                out[key + " end"].append(tail)
                loader.close()
    for config in order:
        loader = make_loader(store, 256, config, True)
        out[f"B {config} break-after-2"].append(epoch(loader, stop=2)[1])
        first, total, _ = epoch(loader)
        out[f"B {config} next-pass first"].append(first)
        out[f"B {config} next-pass epoch"].append(total)
        loader.close()
    for config in ("processes", "threads"):
        loader = make_loader(store, 256, config, True)
        for k in range(5):
            out[f"C {config} epoch {k + 1}"].append(epoch(loader)[1])
        loader.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import stoker

    photos = os.path.join(args.data, "images", "photos")
    if not os.path.isdir(photos):
        sys.exit(f"{photos} not found: run scripts/fetch_data.py first")
    tmp = tempfile.mkdtemp(prefix="stoker-bench-epochs-")
    store = str(stoker.convert.images(photos, os.path.join(tmp, "encoded")).path)
    print(f"load before: {os.getloadavg()}; usable cores {len(os.sched_getaffinity(0))}")
    epoch(make_loader(store, 256, "threads", True))  # warm: page cache, torch kernels
    out: dict[str, list[float]] = defaultdict(list)
    for r in range(args.rounds):
        order = CONFIGS[r % 3 :] + CONFIGS[: r % 3]
        one_round(store, order, out)
        print(f"round {r + 1} done, load {os.getloadavg()}", flush=True)
    print(f"\nmedians of {args.rounds} rounds, seconds (min-max); ratio = processes or persistent / threads")
    for key in sorted(out, key=lambda k: (k[0], list(out).index(k))):
        vals = out[key]
        med = statistics.median(vals)
        line = f"{key:<40} {med:7.3f}  ({min(vals):.3f}-{max(vals):.3f})"
        for c in ("processes", "persistent"):
            if f" {c}" in key and not key.endswith(" end"):  # a ratio of near-zero teardowns means nothing
                ref = out.get(key.replace(f" {c}", " threads"))
                if ref:
                    line += f"   x{med / statistics.median(ref):.2f} of threads"
        print(line)
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
