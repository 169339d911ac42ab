"""Run one contender on one workload and print one JSON line (called by run.py in the right venv).

Memory is measured over the contender's process tree (this process and its workers) with
``stoker/pipeline/memory.py``, loaded by path so that peers' environments need no stoker: the
peak PSS (shared pages counted once; sampled every ``MEMORY_EVERY`` s while loading) and the peak
USS (pages each process alone maps), beside the summed peak RSS of each process. The format is
written by another run of this script (``--prepare-only``), so the writer's heap is not counted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from registry import contenders_for  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

# imported before the clock of the first batch starts (``import_s``), so that ``first_batch_s`` is the
# loader's own start (construction to first batch), not the import of torch that every contender pays
IMPORTS = ("torch", "tokenizers", "transformers", "PIL.Image", "simplejpeg")
LIBRARIES = {
    "stoker": ("stoker", "stoker.text", "stoker.vision"),
    "torchdata": ("torchdata.stateful_dataloader",),
    "HF datasets": ("datasets",),
    "WebDataset": ("webdataset",),
    "LitData": ("litdata",),
    "SPDL": ("spdl.pipeline",),
    "NVIDIA DALI": ("nvidia.dali",),
    "MosaicML": ("streaming",),
    "FFCV": ("ffcv",),
}
MEMORY_EVERY = 0.25  # seconds between memory samples while loading
_spec = importlib.util.spec_from_file_location(
    "stoker_memory", Path(__file__).resolve().parents[2] / "src" / "stoker" / "pipeline" / "memory.py"
)
if _spec is None or _spec.loader is None:
    raise ImportError("stoker's src/stoker/pipeline/memory.py is missing beside benchmarks/")
memory = importlib.util.module_from_spec(_spec)
sys.modules["stoker_memory"] = memory  # dataclasses look their module up
_spec.loader.exec_module(memory)


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and its live worker processes."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in [os.getpid(), *memory.descendants(os.getpid())]:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def peak_rss_mb() -> float:
    """Peak RSS of this process plus that of each worker process it has (VmHWM of each; shared
    pages count in each process that touched them). VmHWM, not getrusage: ru_maxrss survives
    exec, so it would start at the size of run.py, the process that started this one."""
    total = 0
    for pid in [os.getpid(), *memory.descendants(os.getpid())]:
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
    return total / 1024


def evict(*dirs: Path) -> None:
    """Drop the files under ``dirs`` from the page cache, so that every contender's first batch reads
    its data cold: otherwise the raw .npy that several peers share stays cached between them while a
    format only one contender reads (stoker's store) was evicted by the formats written since."""
    for f in (f for d in dirs for f in d.rglob("*") if f.is_file()):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_imports(contender: str) -> float:
    """Import the libraries ``contender`` loads with (those installed); returns the seconds taken."""
    t0 = time.perf_counter()
    names = [m for key, mods in LIBRARIES.items() if contender.startswith(key) for m in mods]
    for name in (*IMPORTS, *names):
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # not in this environment: the contender's load says so if it needs it
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--contender", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument(
        "--keep", action="store_true", help="keep the written format, and load one kept by an earlier --keep run"
    )
    ap.add_argument("--prepare-only", action="store_true", help="write the format into its directory, then exit")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    w = WORKLOADS[args.workload]
    raw = Path(args.root) / w.name / "raw"
    work = Path(args.root) / w.name / "".join(c if c.isalnum() else "_" for c in args.contender)
    out = {"contender": args.contender, "workload": w.name}
    try:
        _, prepare, load = contenders_for(w.name)[args.contender]
        ready = work / ".prepared"
        if args.prepare_only:
            t0 = time.perf_counter()
            prepare(w, raw, work)
            print(json.dumps({"write_s": time.perf_counter() - t0}), flush=True)
            os._exit(0)
        if not (args.keep and ready.is_file()):
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            # in a process of its own: what the writer leaves on this process's heap (a conversion's
            # buffers, freed but kept by malloc) would otherwise count in the loader's memory, and be
            # shared into its forked workers
            done = subprocess.run(
                [sys.executable, __file__, *sys.argv[1:], "--prepare-only"], capture_output=True, text=True
            )
            said = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode or not said:
                raise RuntimeError(said[-1]["error"] if said else done.stderr.strip()[-300:])
            out["write_s"] = said[-1]["write_s"]  # the writer's own time, not the process start
            out["bytes_on_disk"] = du(work)
            ready.write_text("ok")
        evict(raw, work)
        out["import_s"] = warm_imports(args.contender)
        t0 = time.perf_counter()
        make_iter, count = load(w, raw, work)
        it = iter(make_iter())
        first = next(it)
        out["first_batch_s"] = time.perf_counter() - t0
        samples = count(first)
        del first
        peak = memory.tree_memory()
        t0, c0 = time.perf_counter(), cpu_seconds()
        samples, sampled = 0, t0
        while time.perf_counter() - t0 < args.seconds:
            for batch in it:
                samples += count(batch)
                now = time.perf_counter()
                if now - sampled >= MEMORY_EVERY:
                    peak, sampled = peak.peak(memory.tree_memory()), now
                if now - t0 >= args.seconds:
                    break
            else:
                it = iter(make_iter())
        out["samples_per_s"] = samples / (time.perf_counter() - t0)
        out["cpu_us_per_sample"] = (cpu_seconds() - c0) / max(samples, 1) * 1e6
        out["load_average"] = os.getloadavg()[0]
        out["peak_rss_mb"] = peak_rss_mb()
        peak = peak.peak(memory.tree_memory())
        out["peak_pss_mb"], out["peak_uss_mb"] = peak.pss / 2**20, peak.uss / 2**20
        out["peak_pss_file_mb"], out["processes"] = peak.pss_file / 2**20, peak.processes
        out["peak_pss_anon_mb"], out["peak_pss_shmem_mb"] = peak.pss_anon / 2**20, peak.pss_shmem / 2**20
    except Exception as exc:  # noqa: BLE001 - the table says why a contender has no figure
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-2000:]
    finally:
        if not args.keep and not args.prepare_only:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out), flush=True)
    os._exit(
        1 if args.prepare_only else 0
    )  # prepare-only: it exits 0 above once written  # do not wait for loaders' worker processes to wind down


if __name__ == "__main__":
    main()
