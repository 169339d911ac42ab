"""What ``stoker doctor -- python train.py`` costs a training script: the same script bare and under the doctor.

The script: a torch DataLoader with worker processes (its workers forked, their fetches timed, their
memory sampled) feeding a main-thread step of ``--matmuls`` small matmuls (the default 12: ~0.4 ms of CPU
on one core, a step far shorter than a real model's, so the doctor's share is large here), for a fixed number of steps. It
measures its own loop (first fetch to last step): the wall seconds, and the CPU seconds of its
whole process tree (itself and its workers, the doctor's recorder thread included), which a
loaded machine disturbs far less than wall time. Under the doctor, the doctor's own process also
samples the tree: its sampler's CPU seconds (``resources.doctor.sampler_cpu_s`` of the report)
are printed per second of the run, beside the script's.

Wall and CPU seconds of whole runs on a loaded 2-core machine spread by ±10 % or more between
rounds, more than the doctor costs. So the doctor's hooks are also timed on their own, in this
process: one DataLoader (no workers) over the same tensors, epochs with the doctor's patches
installed and without, in alternating order, CPU seconds (``process_time``) per batch; once with events
buffered and written by the recorder's thread (the training loop's process) and once with each
event written at once (as a forked DataLoader worker writes its own). Their difference is the
doctor's CPU per batch, printed beside the script's own step.

Rounds are many and short; each runs the script bare and under the doctor, the order alternating
between rounds, so drift hits both. Printed, for wall and CPU seconds: the median and the
interquartile range of each, and the median of the per-round ratios doctor/bare with its
interquartile range; "within noise" when that range holds 1.0 (no difference). The doctor's start-up (its
interpreter, reading the events, writing the report) is outside the loop and not counted: the loop
is what a training run feels.

    .venv/bin/python benchmarks/doctor_overhead.py [--steps 400] [--rounds 16] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
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


def run(cmd: list[str]) -> tuple[float, float]:
    """The script's loop: (wall seconds, CPU seconds of its process tree)."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
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


def hook_cost(batches: int, blocks: int) -> dict[str, tuple[float, float, float]]:
    """CPU seconds per batch the doctor's hooks add, per recorder mode: the quartiles over ``blocks`` paired epochs."""
    import torch
    import torch.utils.data.dataloader as dataloader
    from torch.utils.data import DataLoader, TensorDataset

    from stoker.doctor.instrument import Instrumentation
    from stoker.doctor.recorder import Recorder

    torch.set_num_threads(1)
    loader = DataLoader(TensorDataset(torch.randn(batches * 32, 256)), batch_size=32)

    def epoch() -> float:
        t0 = time.process_time()
        for _ in loader:
            pass
        return time.process_time() - t0

    out: dict[str, tuple[float, float, float]] = {}
    for mode in ("buffered", "written at once"):
        rec = Recorder(tempfile.mkdtemp(prefix="doctor-hooks-"))
        if mode == "buffered":
            rec.start()
        else:
            rec._become_child()  # what a forked worker's recorder does: every event written as it comes
        instr = Instrumentation(rec, probe=False)
        diffs = []
        for i in range(blocks):  # the order alternates: a second epoch is not always the instrumented one
            bare = epoch() if i % 2 else 0.0
            instr.install_torch(dataloader)
            doctored = epoch()
            instr.uninstall()
            diffs.append(doctored - (bare if i % 2 else epoch()))
        rec.close()
        q1, q2, q3 = quartiles(diffs)
        out[mode] = (q1 / batches, q2 / batches, q3 / batches)
    return out


def step_cost(matmuls: int, steps: int = 400) -> float:
    """CPU seconds of the script's step (``matmuls`` matmuls of 32x256 by 256x256), in this process."""
    import torch

    torch.set_num_threads(1)  # as the script does
    w, x = torch.randn(256, 256), torch.randn(32, 256)
    t0 = time.process_time()
    for _ in range(steps):
        y = x
        for _ in range(matmuls):
            y = y @ w
    return (time.process_time() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--matmuls", type=int, default=12, help="256x256 matmuls per step (12: ~0.4 ms of CPU)")
    ap.add_argument("--hook-batches", type=int, default=2000, help="batches per epoch of the hooks' own timing")
    ap.add_argument("--hook-blocks", type=int, default=15, help="paired epochs of the hooks' own timing")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be 2 or more (the spread needs two rounds)")
    tmp = Path(tempfile.mkdtemp(prefix="doctor-overhead-"))
    script = tmp / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    bare_cmd = [sys.executable, str(script), str(args.steps), str(args.workers), str(args.matmuls)]
    out = tmp / "report"
    doctor_cmd = [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(out), "--no-html", "--", *bare_cmd]
    print(
        f"{machine()}; {args.steps} steps of {args.matmuls} small matmuls, DataLoader num_workers={args.workers}, {args.rounds} rounds"
    )
    bare: list[tuple[float, float]] = []
    doc: list[tuple[float, float]] = []
    sampler: list[float] = []  # the doctor's sampler, CPU seconds per second of the run
    for i in range(args.rounds):
        order = [(bare, bare_cmd), (doc, doctor_cmd)]
        for times, cmd in order if i % 2 == 0 else order[::-1]:
            times.append(run(cmd))
        report = json.loads((out / "report.json").read_text())
        sampler.append(report["resources"]["doctor"]["sampler_cpu_s"] / report["wall_s"])
        print(
            f"round {i + 1}: bare {bare[-1][0]:.3f} s ({bare[-1][1]:.3f} CPU-s), "
            f"doctor {doc[-1][0]:.3f} s ({doc[-1][1]:.3f} CPU-s)"
        )
    print(compare("loop wall", [w for w, _ in bare], [w for w, _ in doc]))
    print(compare("loop CPU of the script's tree", [c for _, c in bare], [c for _, c in doc]))
    print(f"the doctor's sampler (its own process): {statistics.median(sampler):.4f} CPU-s per second, median")
    step = step_cost(args.matmuls)
    for mode, (q1, cost, q3) in hook_cost(args.hook_batches, args.hook_blocks).items():
        print(
            f"the doctor's hooks, events {mode}: {1e6 * cost:.1f} us of CPU per batch [{1e6 * q1:.1f}-{1e6 * q3:.1f}] "
            f"(median and quartiles of {args.hook_blocks} paired epochs of {args.hook_batches} batches), "
            f"{100 * cost / step:.2f} % of the script's {1e3 * step:.2f} ms step"
        )


if __name__ == "__main__":
    main()
