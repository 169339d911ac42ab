"""What ``stoker doctor -- python train.py`` costs a training script: the same script bare and under the doctor.

The script: a torch DataLoader with worker processes (its workers forked, their fetches timed, their
memory sampled) feeding a main-thread step of ``--matmuls`` small matmuls (the default 12: ~0.4 ms of CPU
on one core, a step far shorter than a real model's, so the doctor's share is large here), for a fixed
number of steps. It measures its own loop (first fetch to last step): the wall seconds, and the CPU
seconds of its whole process tree (itself and its workers, the doctor's recorder thread included),
which a loaded machine disturbs less than wall time. The doctor's start-up (its interpreter, reading
the events, writing the report) is outside the loop and not counted: the loop is what a training run
feels.

Rounds are many and short; each runs the script bare and under the doctor, the order rotating between
rounds, so drift hits all. Printed, for wall and CPU seconds: the median and the interquartile range
of each, and the median of the per-round ratios doctor/bare with its interquartile range; "within
noise" when that range holds 1.0. Beside them, what the report itself estimates the doctor cost
(``resources.doctor.step_us`` and ``step_share``: its hooks' own timing, event writing and sampling),
and the sampler's CPU per second (it runs in the doctor's own process). ``--compare-src DIR`` adds the
doctor of another checkout's ``src`` (an older commit's, say) as a third contender in the same rounds.

    .venv/bin/python benchmarks/doctor_overhead.py [--steps 400] [--rounds 16] [--workers 2] [--compare-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

TRAIN = """
import sys, time, psutil, torch
from torch.utils.data import DataLoader, TensorDataset

steps, workers, matmuls = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
w = torch.randn(256, 256)
data = TensorDataset(torch.randn(steps * 32, 256))
loader = DataLoader(data, batch_size=32, num_workers=workers, persistent_workers=workers > 0)
for _ in loader:  # warm: workers forked, caches filled
    break
me = psutil.Process()
tree = [me, *me.children(recursive=True)]

def cpu():
    return sum(sum(p.cpu_times()[:2]) for p in tree)

c0, t0 = cpu(), time.perf_counter()
for (x,) in loader:
    for _ in range(matmuls):
        x = x @ w
t1 = time.perf_counter()
print(f"LOOP {t1 - t0:.6f} {cpu() - c0:.6f}")
"""


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """The script's loop: (wall seconds, CPU seconds of its process tree)."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    wall, cpu = next(line for line in out.splitlines() if line.startswith("LOOP ")).split()[1:]
    return float(wall), float(cpu)


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def compare(label: str, bare: list[float], doc: list[float]) -> str:
    """One line: medians and interquartile ranges, the paired ratio, and whether its range holds 1.0."""
    b, d = quartiles(bare), quartiles(doc)
    ratios = quartiles([y / x for x, y in zip(bare, doc)])
    noise = "within noise" if ratios[0] <= 1.0 <= ratios[2] else "beyond noise"
    return (
        f"{label}: bare {b[1]:.3f} s [{b[0]:.3f}-{b[2]:.3f}], doctor {d[1]:.3f} s [{d[0]:.3f}-{d[2]:.3f}]; "
        f"doctor/bare per round {ratios[1]:.3f}x ({100 * (ratios[1] - 1):+.1f} %, "
        f"[{100 * (ratios[0] - 1):+.1f} %, {100 * (ratios[2] - 1):+.1f} %]): {noise}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--matmuls", type=int, default=12, help="256x256 matmuls per step (12: ~0.4 ms of CPU)")
    ap.add_argument("--compare-src", help="the src directory of another stoker checkout: its doctor runs too")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be 2 or more (the spread needs two rounds)")
    tmp = Path(tempfile.mkdtemp(prefix="doctor-overhead-"))
    script = tmp / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    bare_cmd = [sys.executable, str(script), str(args.steps), str(args.workers), str(args.matmuls)]
    out = tmp / "report"
    doctor_cmd = [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(out), "--no-html", "--", *bare_cmd]
    here = str(Path(__file__).resolve().parents[1] / "src")
    contenders = {"bare": (bare_cmd, None), "doctor": (doctor_cmd, here)}
    if args.compare_src:
        contenders[f"doctor of {args.compare_src}"] = (doctor_cmd, str(Path(args.compare_src).resolve()))
    print(
        f"{machine()}; {args.steps} steps of {args.matmuls} small matmuls, DataLoader num_workers={args.workers}, "
        f"{args.rounds} rounds"
    )
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    own: dict[str, list[dict]] = {name: [] for name in contenders if name != "bare"}
    for i in range(args.rounds):
        names = list(contenders)
        for name in names[i % len(names) :] + names[: i % len(names)]:
            cmd, src = contenders[name]
            env = None if src is None else {**os.environ, "PYTHONPATH": src}
            times[name].append(run(cmd, env))
            if src is not None:
                report = json.loads((out / "report.json").read_text())
                own[name].append({**report["resources"]["doctor"], "wall_s": report["wall_s"]})
        print(f"round {i + 1}: " + ", ".join(f"{n} {t[-1][0]:.3f} s ({t[-1][1]:.3f} CPU-s)" for n, t in times.items()))
    bare = times["bare"]
    for name, cost in own.items():
        print(f"{name}:")
        print("  " + compare("loop wall", [w for w, _ in bare], [w for w, _ in times[name]]))
        print("  " + compare("loop CPU of the script's tree", [c for _, c in bare], [c for _, c in times[name]]))
        sampler = statistics.median(c["sampler_cpu_s"] / c["wall_s"] for c in cost)
        print(f"  the doctor's sampler (its own process): {sampler:.4f} CPU-s per second, median")
        if all(c.get("step_us") is not None for c in cost):
            us, share = quartiles([c["step_us"] for c in cost]), quartiles([c["step_share"] for c in cost])
            print(
                f"  the report's own estimate of the doctor's cost: {us[1]:.1f} us per step [{us[0]:.1f}-{us[2]:.1f}], "
                f"{100 * share[1]:.1f} % of the step [{100 * share[0]:.1f}-{100 * share[2]:.1f} %] (median [quartiles])"
            )


if __name__ == "__main__":
    main()
