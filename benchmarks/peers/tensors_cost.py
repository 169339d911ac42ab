"""Where the CPU of a ``tensors`` batch goes (float32 3x32x32 rows, batches of 512, shuffled).

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/peers/tensors_cost.py [--rounds 3] [--batches 400]

Reads the peers' raw ``tensors`` arrays (``run.py`` writes them under ``--root``; made here when
missing), writes a fresh stoker store beside them, and measures, in CPU time (all threads of this
process, so other load on the machine blurs it less than wall time), per sample:

- ``take, one shard``: ``ndarray.take`` of 512 sorted random rows of one mapped shard (a 256 MiB
  source); this row and the next three write into two alternating buffers, as a loader with no
  worker threads does (the batch the user holds, and the next);
- ``take, all shards``: the same rows spread over every shard (what a shuffled batch reads);
- ``minimal loop``: what a loader has to do per batch and nothing more, in one thread: slice a
  permutation, sort, one ``take`` per shard and column into two alternating buffers,
  ``torch.from_numpy``;
- ``Store.gather``: the store's gather of the same batches (plan, shard cache, checks);
- ``Loader w=0``, ``Loader w=2``, ``Loader w=2 prefetch_factor=1``: the whole loader;
- the destination's working set: one ``take`` of 512 rows of one shard into 1, 2, 5 or 10
  rotating 6 MiB buffers (a loader with more batches in flight writes into more memory, which
  falls out of the caches).

With the GIL meter (``benchmarks/gil_meter.py``, built with the system C compiler when one is
there) each row also gets the CPU held under the GIL per batch. Contenders are interleaved over
``--rounds``; medians printed with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import gil_meter  # noqa: E402

B = 512


def raw_arrays(root: Path) -> Path:
    """The peers' raw tensors arrays under ``root`` (written once, as run.py does)."""
    sys.path.insert(0, str(HERE))
    from workloads import WORKLOADS, make_raw

    return make_raw(WORKLOADS["tensors"], root)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/stoker-peers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=400, help="batches per measurement")
    args = ap.parse_args()
    if not os.environ.get(gil_meter._ENV):  # re-run under the meter when it can be built
        lib = gil_meter.build(tempfile.mkdtemp(prefix="gil-meter-"))
        if lib is not None:
            os.execve(sys.executable, [sys.executable, *sys.argv], gil_meter.preload_env(lib))
    warnings.simplefilter("ignore")
    import torch

    import stoker

    meter = gil_meter.GilMeter()
    raw = raw_arrays(Path(args.root))
    scratch = tempfile.TemporaryDirectory(prefix="tensors-cost-")
    store_dir = Path(scratch.name) / "store"
    stoker.write(store_dir, {"x": np.load(raw / "x.npy", mmap_mode="r"), "label": np.load(raw / "labels.npy")})
    store = stoker.open(store_dir)
    n_rows, starts = len(store), store.shard_starts
    shards = [store._cache.get(s) for s in range(store.num_shards)]  # benchmark only: the mapped shards
    xs = [s.columns["x"].data for s in shards]
    labels = [s.columns["label"].data for s in shards]
    rng = np.random.default_rng(0)
    n = args.batches
    spread = [np.sort(rng.permutation(n_rows)[:B]) for _ in range(n)]
    one = [np.sort(rng.choice(len(xs[1]), B, replace=False)) for _ in range(n)]
    bufs = [np.zeros((B, 3, 32, 32), np.float32) for _ in range(10)]
    lbufs = [np.zeros(B, np.int64) for _ in range(2)]

    def per_batch(fn: Callable[[int], object]) -> Callable[[], Iterator[object]]:
        def make() -> Iterator[object]:
            i = 0
            while True:
                yield fn(i % n)
                i += 1

        return make

    def take_all(i: int) -> None:
        idx = spread[i]
        cuts = np.searchsorted(idx, starts).tolist()
        for s in range(len(cuts) - 1):
            a, b = cuts[s], cuts[s + 1]
            if a < b:
                xs[s].take(idx[a:b] - starts[s], axis=0, out=bufs[i % 2][a:b], mode="clip")

    def minimal() -> Iterator[object]:
        perm, k, i = rng.permutation(n_rows), 0, 0
        while True:
            if k + B > n_rows:
                perm, k = rng.permutation(n_rows), 0
            idx = np.sort(perm[k : k + B])
            k += B
            out, lab = bufs[i % 2], lbufs[i % 2]
            i += 1
            cuts = np.searchsorted(idx, starts).tolist()
            for s in range(len(cuts) - 1):
                a, b = cuts[s], cuts[s + 1]
                if a < b:
                    local = idx[a:b] - starts[s]
                    xs[s].take(local, axis=0, out=out[a:b], mode="clip")
                    labels[s].take(local, axis=0, out=lab[a:b], mode="clip")
            yield {"x": torch.from_numpy(out), "label": torch.from_numpy(lab)}

    def loader(**kw: object) -> Callable[[], Iterator[object]]:
        def make() -> Iterator[object]:
            ld = stoker.Loader(store, batch_size=B, shuffle=True, **kw)
            while True:
                yield from ld

        return make

    contenders: dict[str, Callable[[], Iterator[object]]] = {
        "take, one shard": per_batch(lambda i: xs[1].take(one[i], axis=0, out=bufs[i % 2], mode="clip")),
        "take, all shards": per_batch(take_all),
        "minimal loop": minimal,
        "Store.gather": per_batch(lambda i: store.gather(spread[i], ["x", "label"], {"x": bufs[i % 2]})),
        "Loader w=0": loader(num_workers=0),
        "Loader w=2": loader(num_workers=2),
        "Loader w=2 prefetch_factor=1": loader(num_workers=2, prefetch_factor=1),
    }
    for k in (1, 2, 5, 10):
        contenders[f"take, one shard, {k} rotating buffers"] = per_batch(
            lambda i, k=k: xs[1].take(one[i], axis=0, out=bufs[i % k], mode="clip")
        )
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    held: dict[str, list[float]] = {name: [] for name in contenders}
    loads = []
    for _ in range(args.rounds):
        for name, make in contenders.items():
            it = make()
            next(it)
            r0 = meter.read() if meter.available else None
            c0 = time.process_time()
            for _ in range(n):
                next(it)
            cpu[name].append((time.process_time() - c0) / (n * B) * 1e6)
            if r0 is not None:
                held[name].append((meter.read() - r0).held_s / n * 1e6)
            it.close()  # type: ignore[attr-defined]
        loads.append(os.getloadavg()[0])
    print(
        f"tensors (float32 3x32x32, b{B}), {args.rounds} rounds x {n} batches; medians; load {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"{'':42s} {'CPU us/sample':>14s} {'(rounds)':>22s} {'GIL held us/batch':>18s}")
    for name in contenders:
        rounds = ", ".join(f"{v:.2f}" for v in cpu[name])
        gil = f"{statistics.median(held[name]):18.0f}" if held[name] else f"{'-':>18s}"
        print(f"{name:42s} {statistics.median(cpu[name]):14.2f} {rounds:>22s} {gil}")
    scratch.cleanup()


if __name__ == "__main__":
    main()
