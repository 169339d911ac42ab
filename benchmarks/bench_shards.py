"""Stores of many shards: open time, memory maps and gather cost against the shard count.

Writes (once, then reuses) stores of the same 4-byte rows split into N shards, then for each
reader (this checkout's; with ``--baseline FILE`` also an older ``store/reader.py``, loaded
from that file, side by side in the same process on the same stores) prints:

* open: the median time of ``Store(path)``;
* maps after open / after reading every shard once: the store's files in ``/proc/self/maps``;
* seq: the mean time of a 256-row gather over consecutive batches (the second pass over them);
* rand: the same for 256 random rows (sorted), touching a shard per row: where the store has more
  shards than ``STOKER_MAX_MAPPED_SHARDS``, this includes mapping (and validating) evicted shards again.

Run::

    .venv/bin/python benchmarks/bench_shards.py --shards 1000 10000 --dir /tmp/stoker-bench-shards
    git show HEAD~1:src/stoker/store/reader.py > /tmp/old_reader.py
    .venv/bin/python benchmarks/bench_shards.py --shards 1000 10000 --baseline /tmp/old_reader.py
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import shutil
import statistics
import time
from pathlib import Path
from types import ModuleType

import numpy as np

import stoker
from stoker.store import reader as current

ROWS_PER_SHARD = 4


def make_store(root: Path, shards: int) -> Path:
    """A store of ``shards`` shards of ROWS_PER_SHARD int32 rows (written once, then reused)."""
    path = root / f"shards-{shards}"
    if (path / "manifest.json").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    with stoker.StoreWriter(path, shard_size=ROWS_PER_SHARD * 4) as writer:
        for start in range(0, shards * ROWS_PER_SHARD, 4096):
            writer.add_batch({"x": np.arange(start, min(start + 4096, shards * ROWS_PER_SHARD), dtype=np.int32)})
    return path


def maps_of(path: Path) -> int:
    """How many mappings of the store's files this process holds now."""
    root = str(path.resolve())
    with open("/proc/self/maps") as maps:
        return sum(root in line for line in maps)


def load_reader(file: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_reader", file)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(module: ModuleType, path: Path, batches: int) -> dict[str, float]:
    opens = []
    for _ in range(3):
        gc.collect()
        t = time.perf_counter()
        ds = module.Store(path)
        opens.append(time.perf_counter() - t)
        if _ < 2:
            del ds
    gc.collect()
    maps_open = maps_of(path)
    n = len(ds)
    seq_starts = np.arange(0, n - 256, 256)
    for a in seq_starts:  # every shard read once (maps after a full pass)
        ds.gather(np.arange(a, a + 256))
    gc.collect()
    maps_read = maps_of(path)
    rng = np.random.default_rng(0)
    seq = [np.arange(a, a + 256) for a in seq_starts[:batches]]  # consecutive batches, as a loader without shuffle
    rand = [np.sort(rng.integers(0, n, 256)) for _ in range(batches)]
    timings = {}
    for name, work in (("seq", seq), ("rand", rand)):
        for idx in work:  # warm-up: the same batches once (maps the shards they need, if the cap allows)
            ds.gather(idx)
        t = time.perf_counter()
        for idx in work:
            ds.gather(idx)
        timings[name] = (time.perf_counter() - t) / len(work)
    del ds
    gc.collect()
    return {"open": statistics.median(opens), "maps_open": maps_open, "maps_read": maps_read, **timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/stoker-bench-shards"))
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--baseline", type=Path, help="an older store/reader.py to time beside this one")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    readers = [("current", current)]
    if args.baseline:
        readers.append(("baseline", load_reader(args.baseline)))
    print(
        f"{'shards':>7} {'reader':>9} {'open ms':>9} {'maps@open':>10} {'maps@read':>10} {'seq ms':>8} {'rand ms':>8}"
    )
    for shards in args.shards:
        path = make_store(args.dir, shards)
        for name, module in readers:
            r = measure(module, path, args.batches)
            print(
                f"{shards:>7} {name:>9} {r['open'] * 1e3:>9.1f} {r['maps_open']:>10} {r['maps_read']:>10} "
                f"{r['seq'] * 1e3:>8.3f} {r['rand'] * 1e3:>8.3f}"
            )


if __name__ == "__main__":
    main()
