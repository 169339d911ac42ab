"""What ``stoker.doctor()`` costs: a loop of ~1 ms steps, with and without the doctor, side by side.

Each round runs the same loop bare and under the doctor, alternating (so drift hits both), for a
torch DataLoader and a stoker.Loader over a store. The step's compute is a matmul calibrated to
about 1 ms at start (under contention it comes out shorter). Each measured loop follows 50
warm-up steps in the same setting (under the doctor, its sampler thread starts then; a training
run amortizes that over minutes). Printed, bare vs doctor and their ratio: wall ms per step (best
and median round) and CPU ms per step of the whole process (all threads, the doctor's sampler and
writer included; other tenants of shared cores disturb it far less than wall time). Then the same
loops with no compute, whose difference is the doctor's added cost per step in microseconds.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_doctor.py [--steps 200] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stoker  # noqa: E402
from common import machine  # noqa: E402

WARM = 50  # steps run before each measured loop, bare or under the doctor (which starts its threads then)


def calibrate(target_s: float = 0.001) -> tuple[torch.Tensor, int]:
    w = torch.randn(128, 128)
    x = torch.randn(64, 128)
    reps = 1
    while True:
        t = time.perf_counter()
        for _ in range(20):
            y = x
            for _ in range(reps):
                y = y @ w
        dt = (time.perf_counter() - t) / 20
        if dt >= target_s:
            return w, reps
        reps = max(reps + 1, int(reps * target_s / max(dt, 1e-6)))


def step(batch_x: torch.Tensor, w: torch.Tensor, reps: int) -> None:
    y = batch_x[:, :128].float() if batch_x.dim() == 2 else batch_x
    y = torch.zeros(64, 128) + y.mean()
    for _ in range(reps):
        y = y @ w


def run_loop(make_loader, steps: int, w: torch.Tensor, reps: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: all its threads) per step."""
    done = 0
    c = time.process_time()
    t = time.perf_counter()
    while done < steps:
        for batch in make_loader():
            x = batch[0] if isinstance(batch, (list, tuple)) else batch["x"]
            step(x, w, reps)
            done += 1
            if done >= steps:
                break
    return (time.perf_counter() - t) / steps, (time.process_time() - c) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    w, reps = calibrate()
    data = np.random.default_rng(0).standard_normal((4096, 128)).astype(np.float32)
    tmp = tempfile.mkdtemp(prefix="bench-doctor-")
    stoker.write(Path(tmp) / "s", {"x": data})
    torch_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(data)), batch_size=64, shuffle=True
    )
    contenders = {
        "torch DataLoader": lambda: torch_loader,
        "stoker.Loader": lambda: stoker.Loader(Path(tmp) / "s", batch_size=64, shuffle=True, num_workers=1),
    }
    print(
        f"{machine()}; torch {torch.__version__}; step = {reps} matmuls 64x128x128 (~1 ms), {args.steps} steps x {args.rounds} rounds"
    )
    print(f"\n{'loader (measure, round)':<32} {'bare ms/step':>13} {'doctor ms/step':>15} {'doctor/bare':>12}")
    for name, make in contenders.items():
        run_loop(make, 50, w, reps)  # warm-up
        bare, doc = [], []
        for _ in range(args.rounds):
            run_loop(make, WARM, w, reps)
            bare.append(run_loop(make, args.steps, w, reps))
            with stoker.doctor(interval=0.5) as report:
                run_loop(make, WARM, w, reps)  # the sampler's start (NVML, psutil baselines) falls here
                doc.append(run_loop(make, args.steps, w, reps))
            seen = sum(ld["steps"] for ld in report.loaders)
            if seen < args.steps + WARM:
                raise SystemExit(f"the doctor saw {seen} steps of {args.steps}")
        for label, i, pick in (
            ("wall, best", 0, min),
            ("wall, median", 0, statistics.median),
            ("CPU, median", 1, statistics.median),
        ):
            b, d = pick(x[i] for x in bare), pick(x[i] for x in doc)
            print(f"{name + ' (' + label + ')':<32} {1000 * b:>13.3f} {1000 * d:>15.3f} {d / b:>11.3f}x")
    print(f"\n{'no compute: added per step':<32} {'bare us/step':>13} {'doctor us/step':>15} {'added us':>12}")
    for name, make in contenders.items():
        bare, doc = [], []
        for _ in range(args.rounds):
            run_loop(make, WARM, w, 0)
            bare.append(run_loop(make, 5 * args.steps, w, 0))
            with stoker.doctor(interval=0.5):
                run_loop(make, WARM, w, 0)
                doc.append(run_loop(make, 5 * args.steps, w, 0))
        for label, i, pick in (("wall, best", 0, min), ("CPU, median", 1, statistics.median)):
            b, d = pick(x[i] for x in bare), pick(x[i] for x in doc)
            print(
                f"{name + ' (' + label + ')':<32} {1e6 * b:>13.1f} {1e6 * d:>15.1f} {1e6 * (d - b):>12.1f}  = {100 * (d - b) / 0.001:.2f} % of a 1 ms step"
            )


if __name__ == "__main__":
    main()
