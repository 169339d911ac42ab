"""Figures for the README's "Reliability" section: leak checks over many loaders, kill points, fault cases.

    python scripts/reliability.py                 # 300 loaders
    python scripts/reliability.py --loaders 60

Creates and drops ``--loaders`` loaders as a user would, a third of each kind: a store read by
threads, a torch Dataset read by worker processes, and persistent process workers closed by
``with``; iterates a few batches of each and breaks. Before and after (after one warm-up round
of each kind, so imports and first-use caches are not counted) it reads this process's open file
descriptors (``/proc/self/fd``), live threads (``threading.enumerate()``), ``/dev/shm`` segments
named ``stoker_<pid>_*`` (all ``stoker_*`` printed beside them: other processes' are not ours) and
RSS (``VmRSS``). Exits 1 if fds, threads or segments grew, or RSS grew by more than
``--rss-bound`` (default 20 %).

It also counts the kill points the fault tests reach with SIGKILL (``tests/faults/``) and the
fault cases per file (``pytest --collect-only`` over ``tests/faults`` and
``tests/unit/store/test_integrity.py``).
"""

from __future__ import annotations

import argparse
import ast
import gc
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import torch

import stoker

ROOT = Path(__file__).resolve().parent.parent
FAULT_FILES = ["tests/faults", "tests/unit/store/test_integrity.py"]


class Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A map-style Dataset: row i is 16 float32 equal to i (read by worker processes)."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> np.ndarray:
        return np.full(16, i, dtype=np.float32)


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def shm(prefix: str) -> list[str]:
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith(prefix)) if os.path.isdir("/dev/shm") else []


def snapshot() -> dict[str, int]:
    gc.collect()
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": len(threading.enumerate()),
        "shm_mine": len(shm(f"stoker_{os.getpid()}_")),
        "shm_all": len(shm("stoker_")),
        "rss_kib": rss_kib(),
    }


def one_loader(kind: int, store: Path, batches: int = 3) -> int:
    """Build a loader of ``kind`` (0 store/threads, 1 Dataset/processes, 2 persistent + with), read, break."""
    seen = 0
    if kind == 0:
        loader = stoker.Loader(store, batch_size=16, shuffle=True, num_workers=2)
    elif kind == 1:
        loader = stoker.Loader(Rows(), batch_size=16, shuffle=True, num_workers=2)
    else:
        with stoker.Loader(Rows(), batch_size=16, num_workers=2, persistent_workers=True) as loader:
            for _ in range(2):  # two epochs on the same workers
                for i, _batch in enumerate(loader):
                    seen += 1
                    if i + 1 == batches:
                        break
        return seen
    for i, _batch in enumerate(loader):
        seen += 1
        if i + 1 == batches:
            break
    return seen


def leak_check(loaders: int, work: Path) -> tuple[dict[str, int], dict[str, int], int]:
    """(before, after, batches read) around ``loaders`` loaders, after one warm-up loader of each kind."""
    store = work / "store"
    rng = np.random.default_rng(0)
    stoker.write(store, {"x": rng.integers(0, 255, size=(512, 64), dtype=np.uint8), "y": np.arange(512)})
    for kind in range(3):
        one_loader(kind, store)
    before = snapshot()
    read = sum(one_loader(i % 3, store) for i in range(loaders))
    after = snapshot()
    return before, after, read


def kill_points() -> list[tuple[str, str]]:
    """(test, point) for every test under tests/faults that SIGKILLs a process at a chosen point."""
    found = []
    for path in sorted((ROOT / "tests/faults").glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            body = ast.get_source_segment(text, node) or ""
            if not re.search(r"SIGKILL|_kill\(|kill_at=\d", body):
                continue
            markers = [  # the last argument of _start_paused(...): what the child prints where it stops
                call.args[-1].value
                for call in ast.walk(node)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "_start_paused"
                and isinstance(call.args[-1], ast.Constant)
            ]
            rows = re.findall(r"kill_at=(\d+)", body)
            if markers:
                point = f"conversion stopped at {markers[0]!r}"
            elif rows:
                point = f"worker process reading row {rows[0]}"
            else:
                point = "the consumer, with segments in flight"
            found.append((f"{path.name}::{node.name}", point))
    return found


def fault_cases() -> Counter[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FAULT_FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return Counter(line.split("::")[0] for line in out.stdout.splitlines() if "::" in line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loaders", type=int, default=300)
    parser.add_argument("--rss-bound", type=float, default=0.20, help="RSS growth allowed (fraction)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        before, after, read = leak_check(args.loaders, Path(tmp))
    print(
        f"leak check: {args.loaders} loaders (store/threads, Dataset/processes, persistent+with; "
        f"a third each), {read} batches read, each loop left by break"
    )
    failed = []
    for key, label in [
        ("fds", "open fds"),
        ("threads", "threads"),
        ("shm_mine", "/dev/shm stoker_<pid>_*"),
        ("shm_all", "/dev/shm stoker_* (any pid)"),
    ]:
        grew = after[key] - before[key]
        print(f"  {label:30} {before[key]:>8} -> {after[key]:<8} {grew:+d}")
        if key != "shm_all" and grew > 0:
            failed.append(label)
    growth = after["rss_kib"] / before["rss_kib"] - 1
    print(f"  {'RSS (MiB)':30} {before['rss_kib'] / 1024:>8.1f} -> {after['rss_kib'] / 1024:<8.1f} {growth:+.1%}")
    if growth > args.rss_bound:
        failed.append(f"RSS (+{growth:.1%} > {args.rss_bound:.0%})")

    points = kill_points()
    print(f"\nkill -9 at chosen points (tests/faults): {len(points)} tests, {len({p for _, p in points})} points")
    for test, point in points:
        print(f"  {test:95} {point}")

    cases = fault_cases()
    print(f"\nfault cases collected ({' '.join(FAULT_FILES)}): {sum(cases.values())}")
    for file, n in sorted(cases.items()):
        print(f"  {file:45} {n}")

    if failed:
        print(f"\nFAILED: grew: {', '.join(failed)}")
        return 1
    print("\nno growth in fds, threads or segments; RSS within the bound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
