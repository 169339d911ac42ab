"""Run one contender on one workload and print one JSON line (called by run.py in the right venv)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from registry import contenders_for  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _descendants(pid: int) -> list[int]:
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            kids = [int(c) for c in open(f"/proc/{pid}/task/{tid}/children").read().split()]
        except OSError:
            continue
        for kid in kids:
            out += [kid, *_descendants(kid)]
    return out


def peak_rss_mb() -> float:
    """Peak RSS of this process plus that of each worker process it has (VmHWM of each; shared
    pages count in each process that touched them). VmHWM, not getrusage: ru_maxrss survives
    exec, so it would start at the size of run.py, the process that started this one."""
    total = 0
    for pid in [os.getpid(), *_descendants(os.getpid())]:
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return total / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--contender", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    w = WORKLOADS[args.workload]
    raw = Path(args.root) / w.name / "raw"
    work = Path(args.root) / w.name / "".join(c if c.isalnum() else "_" for c in args.contender)
    out = {"contender": args.contender, "workload": w.name}
    try:
        _, prepare, load = contenders_for(w.name)[args.contender]
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        t0 = time.perf_counter()
        prepare(w, raw, work)
        out["write_s"] = time.perf_counter() - t0
        out["bytes_on_disk"] = du(work)
        t0 = time.perf_counter()
        make_iter, count = load(w, raw, work)
        it = iter(make_iter())
        first = next(it)
        out["first_batch_s"] = time.perf_counter() - t0
        samples = count(first)
        del first
        t0 = time.perf_counter()
        samples = 0
        while time.perf_counter() - t0 < args.seconds:
            for batch in it:
                samples += count(batch)
                if time.perf_counter() - t0 >= args.seconds:
                    break
            else:
                it = iter(make_iter())
        out["samples_per_s"] = samples / (time.perf_counter() - t0)
        out["peak_rss_mb"] = peak_rss_mb()
    except Exception as exc:  # noqa: BLE001 - the table says why a contender has no figure
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-2000:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out), flush=True)
    os._exit(0)  # do not wait for loaders' worker processes to wind down


if __name__ == "__main__":
    main()
