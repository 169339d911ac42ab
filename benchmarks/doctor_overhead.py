"""What ``stoker doctor -- python train.py`` costs a training script: the same script bare and under the doctor.

The script: a torch DataLoader with worker processes (its workers forked, their fetches timed, their
memory sampled) feeding a step of ~2 ms of matmuls, for a fixed number of steps. It times its own loop
(first fetch to last step) and prints it. Each round runs it bare, then under the doctor (the order
alternates between rounds, so drift hits both); the doctor samples at its default interval. Printed:
the loop's median seconds bare and under the doctor, their ratio, and the best round of each (the
run least disturbed by other tenants of the machine). The doctor's start-up (its interpreter,
reading the events, writing the report) is outside the loop and not counted: the loop is what a
training run feels.

    .venv/bin/python benchmarks/doctor_overhead.py [--steps 1500] [--rounds 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

TRAIN = """
import sys, time, torch
from torch.utils.data import DataLoader, TensorDataset

steps, workers = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(1)
w = torch.randn(256, 256)
data = TensorDataset(torch.randn(steps * 32, 256))
loader = DataLoader(data, batch_size=32, num_workers=workers, persistent_workers=workers > 0)
for _ in loader:  # warm: workers forked, caches filled
    break
t0 = time.perf_counter()
for (x,) in loader:
    for _ in range(12):
        x = x @ w
print(f"LOOP {time.perf_counter() - t0:.6f}")
"""


def run(cmd: list[str]) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(next(line for line in out.splitlines() if line.startswith("LOOP ")).split()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="doctor-overhead-"))
    script = tmp / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    bare_cmd = [sys.executable, str(script), str(args.steps), str(args.workers)]
    doctor = [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(tmp / "report"), "--no-html"]
    doctor_cmd = [*doctor, "--", *bare_cmd]
    print(f"{machine()}; {args.steps} steps of ~2 ms, DataLoader num_workers={args.workers}, {args.rounds} rounds")
    bare: list[float] = []
    doc: list[float] = []
    for i in range(args.rounds):
        order = [(bare, bare_cmd), (doc, doctor_cmd)]
        for times, cmd in order if i % 2 == 0 else order[::-1]:
            times.append(run(cmd))
        print(f"round {i + 1}: bare {bare[-1]:.3f} s, doctor {doc[-1]:.3f} s")
    for label, pick in (("median", statistics.median), ("best", min)):
        b, d = pick(bare), pick(doc)
        print(
            f"loop seconds ({label}): bare {b:.3f}, doctor {d:.3f}, doctor/bare {d / b:.3f}x ({100 * (d / b - 1):+.1f} %)"
        )


if __name__ == "__main__":
    main()
