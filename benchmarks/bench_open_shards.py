"""Opening a store of many shards (issue 37: the 100-node conversion makes ~150,000 shards).

Writes (once, kept in ``--dir``) a store of ``--shards`` one-row shards of 1 KiB, then times, in
fresh processes, ``stoker.Store(path)`` (the manifest parsed and checked, every shard file's size
checked: one lstat each) ``--rounds`` times, and one shuffled epoch with its first batch. Run from the
repository root::

    .venv/bin/python benchmarks/bench_open_shards.py --shards 150000 --dir /tmp/stoker-150k
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import stoker

OPEN = "import sys, time, stoker; t = time.perf_counter(); stoker.Store(sys.argv[1]); print(time.perf_counter() - t)"
EPOCH = (
    "import sys, time, stoker; t = time.perf_counter(); loader = stoker.Loader(sys.argv[1], 256, shuffle=True, seed=0); "
    "it = iter(loader); next(it); first = time.perf_counter() - t; sum(1 for _ in it); "
    "print(first, time.perf_counter() - t)"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=150_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/stoker-many-shards"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-epoch", action="store_true")
    args = ap.parse_args()
    path = args.dir / f"{args.shards}"
    if not (path / "manifest.json").is_file():
        t = time.perf_counter()
        stoker.write(path, {"x": np.zeros((args.shards, 1024), np.uint8)}, shard_size=1024, overwrite=True)
        print(f"wrote {args.shards:,} shards in {time.perf_counter() - t:.1f} s")
    opens = [float(subprocess.check_output([sys.executable, "-c", OPEN, str(path)])) for _ in range(args.rounds)]
    print(f"open: {statistics.median(opens):.2f} s (median of {args.rounds}, {min(opens):.2f}-{max(opens):.2f})")
    if not args.no_epoch:
        first, epoch = map(float, subprocess.check_output([sys.executable, "-c", EPOCH, str(path)]).split())
        print(f"loader: first batch {first:.2f} s, one shuffled epoch {epoch:.1f} s ({args.shards:,} rows)")


if __name__ == "__main__":
    main()
