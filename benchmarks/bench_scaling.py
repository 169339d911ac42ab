"""Many cores, one GIL (issue 14): how image pipelines fare beside a training loop that runs Python.

Pipelines, each making shuffled training batches of 32 real photos (RandomResizedCrop(224) + flip,
uint8, labels) from scripts/fetch_data.py's ``data/images/photos``:
  stoker threads     stoker.Loader(ImageSource(encoded store), engine="threads")
  stoker processes   the same with engine="processes"
  stoker default     the same with no engine given (the source's default), on request (--pipelines)
  seed 002           a hand-written ImageFolder Dataset (Pillow decode, crop with the box form of
                     Image.resize, flip: benchmarks/peers' recipe), torch DataLoader(pin_memory=True)
All use as many workers as the process may use cores.

For each pipeline:
  rate, step 0/10/30   images/s from the loader's construction to the last batch of one epoch,
                       the main thread running a pure-Python busy loop of 0, 10 or 30 ms after
                       each batch (a stand-in for a Python-heavy training step); time to the first
                       batch is printed too
  free cores           the rate with the main thread idle and the whole process pinned
                       (os.sched_setaffinity) to one core fewer: what the cores a step leaves free
                       can deliver. The target compares the 30 ms rate with
                       min(step-bound rate 32 / 30 ms, free cores)
  GIL share            the share of each image's CPU time during which the training process's
                       GIL is held (measured, see below), and Amdahl's bound on the speedup it
                       allows: speedup(n) = 1 / (s + (1 - s) / n) at 16 and 64 cores

How the GIL share is measured: benchmarks/gil_meter.py wraps PyEval_SaveThread/RestoreThread (the
calls every C extension releases and retakes the GIL with) in a preloaded library that adds up
the CPU time spent with the GIL released (per-thread CPU clocks). Over one epoch with the main
thread idle, in the training process: held = process CPU - CPU with the GIL released. The share
is held / (process CPU + the CPU of its worker processes), per image. It counts CPU, not wall
time, so other work on a shared machine does not move it; the wall-clock alternative (a Python
counter in the main thread slowed down by a worker) moved by tens of percent here under load.
A child process runs each measurement; rounds interleave the pipelines and conditions, and the
medians are reported (other engineers share these 2 cores).

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_scaling.py [--data data] [--rounds 3]

Targets (issue 14): stoker at a 30 ms step >= 0.9x min(step-bound, free cores); GIL held <= 5 %
of each image's time on the default image path (>= 12x on 16 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))  # the seed's crop recipe (contenders_images.pil_train)
BATCH = 32
PIPELINES = ("stoker threads", "stoker processes", "seed 002 DataLoader")
EXTRA = ("stoker default",)  # engine left to the schedule's default (--pipelines)
ENGINES = {"stoker threads": "threads", "stoker processes": "processes", "stoker default": None}
STEPS_MS = (0, 10, 30)


# -- inside a child process --------------------------------------------------------------------------
class SeedFolder:
    """Seed 002's ImageFolder Dataset with the training crop (benchmarks/peers' ``pil_train``)."""

    def __init__(self, root: str) -> None:
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = [
            (os.path.join(root, c, f), i)
            for i, c in enumerate(classes)
            for f in sorted(os.listdir(os.path.join(root, c)))
        ]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> Any:
        import torch
        from contenders_images import pil_train
        from PIL import Image

        path, label = self.samples[i]
        with Image.open(path) as im:
            return torch.from_numpy(pil_train(im)).permute(2, 0, 1), label


def make_loader(pipeline: str, store: str, photos: str, workers: int) -> Any:
    import torch

    if pipeline == "seed 002 DataLoader":
        return torch.utils.data.DataLoader(
            SeedFolder(photos), batch_size=BATCH, shuffle=True, num_workers=workers, pin_memory=True
        )
    import stoker
    from stoker import vision

    engine = ENGINES[pipeline]
    source = vision.ImageSource(store, vision.train_transforms(224, normalize=False))
    return stoker.Loader(source, batch_size=BATCH, shuffle=True, num_workers=workers, engine=engine)


def busy(seconds: float) -> None:
    """Pure Python for ``seconds``: holds the GIL as a Python-heavy training step does."""
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement: an epoch of ``spec['pipeline']`` with a busy step, optionally pinned or metered."""
    import warnings

    warnings.simplefilter("ignore")  # pin_memory without CUDA
    if spec.get("cpus"):
        os.sched_setaffinity(0, spec["cpus"])  # threads and worker processes started from here inherit it
    meter = None
    if spec.get("meter"):
        sys.path.insert(0, str(HERE))
        from gil_meter import GilMeter

        meter = GilMeter()
        if not meter.available:
            return {"error": "the GIL meter library is not loaded"}
    import psutil

    t0 = time.perf_counter()
    loader = make_loader(spec["pipeline"], spec["store"], spec["photos"], spec["workers"])
    last = len(loader) - 1
    images, first, step = 0, None, spec["step_ms"] / 1000
    marks: list[tuple[Any, float, int]] = []  # (GIL reading, worker-process CPU, images before) at two batches
    for k, batch in enumerate(loader):
        n = len(batch["label"]) if isinstance(batch, dict) else len(batch[1])
        if first is None:
            first = time.perf_counter() - t0
        if meter is not None and k in (0, last):
            # from the first batch (start-up costs left out) to the last, while the workers still live
            kids = sum(c.cpu_times().user + c.cpu_times().system for c in psutil.Process().children(True))
            marks.append((meter.read(), kids, images + (n if k == 0 else 0)))
        images += n
        if step:
            busy(step)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"rate": images / wall, "first_s": first, "images": images}
    out["engine"] = loader.engine
    if len(marks) == 2:
        (r0, kids0, n0), (r1, kids1, n1) = marks
        reading, measured = r1 - r0, n1 - n0
        out.update(
            held_us=reading.held_s / measured * 1e6,
            cpu_us=(reading.cpu_s + kids1 - kids0) / measured * 1e6,
            releases=reading.releases / measured,
        )
    del loader
    return out


# -- the parent ----------------------------------------------------------------------------------------
def run_child(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, env=env, timeout=900
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def median(values: list[float]) -> float:
    import statistics

    return statistics.median(values) if values else float("nan")


def amdahl(share: float, cores: int) -> float:
    return 1.0 / (share + (1.0 - share) / cores)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data", help="where scripts/fetch_data.py put the images (default data/)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported (default 3)")
    ap.add_argument(
        "--pipelines",
        default=",".join(PIPELINES),
        help=f"comma-separated pipelines among {PIPELINES + EXTRA} (default: the first three)",
    )
    ap.add_argument("--json", default="results/scaling.json", help="where to save the results")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return

    unknown = [p for p in args.pipelines.split(",") if p and p not in PIPELINES + EXTRA]
    if unknown:
        sys.exit(f"unknown pipeline(s) {unknown}; choose among {PIPELINES + EXTRA}")
    sys.path.insert(0, str(HERE))
    import gil_meter
    import stoker
    from common import machine

    photos = Path(args.data) / "images" / "photos"
    if not photos.is_dir():
        sys.exit(f"{photos} is missing: run python scripts/fetch_data.py images --out {args.data}")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("needs at least 2 cores: one for the step, the others for the pipeline")
    tmp = tempfile.mkdtemp(prefix="stoker-bench-scaling-")
    store = stoker.convert.images(photos, os.path.join(tmp, "encoded")).path
    lib = gil_meter.build(tmp)
    print(f"machine: {machine()}; {len(cpus)} usable cores; load average {os.getloadavg()[0]:.1f}")
    print(f"data: {len(stoker.open(store))} photos, encoded store; batches of {BATCH}; workers = {len(cpus)}")
    if lib is None:
        print("no C compiler: the GIL share is not measured")
    pipelines = [p for p in args.pipelines.split(",") if p]
    base = {"store": str(store), "photos": str(photos), "workers": len(cpus)}
    conditions = [(f"step {s} ms", {"step_ms": s}) for s in STEPS_MS]
    conditions.append(("free cores", {"step_ms": 0, "cpus": cpus[:-1]}))
    rates: dict[tuple[str, str], list[float]] = {}
    firsts: dict[tuple[str, str], list[float]] = {}
    meters: dict[str, list[dict[str, float]]] = {}
    errors: dict[tuple[str, str], str] = {}
    chosen: dict[tuple[str, str], list[str]] = {}  # the engine each run used (what "default" became)
    for r in range(args.rounds):
        for pipeline in pipelines:
            for label, extra in conditions:
                got = run_child({**base, "pipeline": pipeline, **extra})
                if "error" in got:
                    errors[(pipeline, label)] = got["error"]
                    continue
                rates.setdefault((pipeline, label), []).append(got["rate"])
                chosen.setdefault((pipeline, label), []).append(str(got.get("engine")))
                firsts.setdefault((pipeline, label), []).append(got["first_s"])
            if lib is not None:
                got = run_child({**base, "pipeline": pipeline, "step_ms": 0, "meter": True}, gil_meter.preload_env(lib))
                if "error" in got:
                    errors[(pipeline, "GIL meter")] = got["error"]
                else:
                    meters.setdefault(pipeline, []).append(got)
            print(
                f"  round {r + 1}/{args.rounds} {pipeline}: "
                + ", ".join(
                    f"{label} {rates.get((pipeline, label), [float('nan')])[-1]:,.0f}"
                    + (f" ({chosen.get((pipeline, label), ['?'])[-1]})" if ENGINES.get(pipeline, "") is None else "")
                    for label, _ in conditions
                ),
                flush=True,
            )

    step_bound = BATCH / 0.030
    print(f"\nimages/s from construction to the last batch of an epoch (medians of {args.rounds} rounds)")
    header = f"{'pipeline':<22}" + "".join(f"{label:>12}" for label, _ in conditions)
    print(header + f"{'first batch':>13}{'30ms/limit':>12}")
    results: dict[str, Any] = {}
    for pipeline in pipelines:
        row = {label: median(rates.get((pipeline, label), [])) for label, _ in conditions}
        first = median(firsts.get((pipeline, "step 0 ms"), []))
        limit = min(step_bound, row["free cores"])
        ratio = row["step 30 ms"] / limit
        results[pipeline] = {"rates": row, "first_batch_s": first, "step30_vs_limit": ratio}
        if ENGINES.get(pipeline, "") is None:
            results[pipeline]["engines"] = {label: chosen.get((pipeline, label), []) for label, _ in conditions}
        print(
            f"{pipeline:<22}"
            + "".join(f"{row[label]:>12,.0f}" for label, _ in conditions)
            + f"{first:>12.2f}s{ratio:>11.2f}x"
        )
    print(f"(limit = min(step-bound {step_bound:,.0f} img/s, the pipeline's own free-cores rate))")

    if meters:
        print("\nGIL held in the training process, per image, main thread idle (medians)")
        print(f"{'pipeline':<22}{'held us':>9}{'CPU us':>9}{'share':>8}{'releases':>10}{'x16':>7}{'x64':>7}")
        for pipeline in pipelines:
            runs = meters.get(pipeline)
            if not runs:
                continue
            held, cpu = median([m["held_us"] for m in runs]), median([m["cpu_us"] for m in runs])
            share = median([m["held_us"] / m["cpu_us"] for m in runs])
            rel = median([m["releases"] for m in runs])
            results[pipeline].update(gil_held_us=held, cpu_us=cpu, gil_share=share, releases_per_image=rel)
            results[pipeline].update(speedup16=amdahl(share, 16), speedup64=amdahl(share, 64))
            print(
                f"{pipeline:<22}{held:>9.0f}{cpu:>9.0f}{share * 100:>7.1f}%{rel:>10.1f}"
                f"{amdahl(share, 16):>6.1f}x{amdahl(share, 64):>6.1f}x"
            )

    names = [p for p in pipelines if p in results]
    if len(names) > 1:
        print("\nratios to seed 002 (medians of rates)")
        seed = results.get("seed 002 DataLoader")
        for pipeline in names:
            if seed and pipeline != "seed 002 DataLoader":
                cells = ", ".join(
                    f"{label} {results[pipeline]['rates'][label] / seed['rates'][label]:.2f}x"
                    for label, _ in conditions
                )
                print(f"  {pipeline:<20} {cells}")
    for (pipeline, label), message in errors.items():
        print(f"FAILED {pipeline} / {label}: {message}")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(
            {"machine": machine(), "results": results, "errors": {f"{k[0]} / {k[1]}": v for k, v in errors.items()}},
            f,
            indent=2,
        )


if __name__ == "__main__":
    main()
