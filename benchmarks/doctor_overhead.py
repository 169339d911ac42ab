"""What ``stoker doctor -- python train.py`` costs a training loop: the same loop bare and under the doctor, side by side.

The script: a torch DataLoader with worker processes (its workers forked, their fetches timed, their
memory sampled) feeding a main-thread step of ``--matmuls`` 256x256 matmuls (12: ~2 ms a step on this
2-vCPU VM; 300: tens of ms, nearer a real model's step), for ``--steps`` steps of one epoch.

On a shared machine whole runs differ by 10-30 % from one to the next (the CPU's own speed varies:
the same work takes 0.8 or 1.2 CPU-s), far more than the 2 % to be shown. So the contenders run in
lockstep, in blocks of ``--block`` steps: every contender's process tree (the doctor's own process,
the script, its workers) is started, then stopped (SIGSTOP), and each cycle continues one tree,
lets its script run one block, stops it again and moves to the next contender; which contender goes
first rotates between cycles. A bare block and a doctor block a few milliseconds apart meet the same
machine, and a stopped tree does no work, so each block's wall seconds (timed by the script) and the
CPU seconds of its tree (read from ``/proc``, the doctor's sampler included) belong to it alone. The
doctor's clocks (its sampler, its event writers) keep running while its tree is stopped, so they run
more often per active second than in a real run: its cost is overstated, never hidden. ``--rounds``
fresh sets of processes repeat this (start-up states differ).

Printed for wall and CPU: the loop's slowdown (the doctor's blocks summed over the bare ones summed,
minus 1) with a 95 % bootstrap interval over the cycles, and the median of the per-cycle differences
with its quartiles and 95 % interval (order statistics); "<= 2 % shown" when both upper bounds are at
most 2 %, "within noise" when the interval holds 0. Beside them: the load average, the report's own
estimate of what the doctor cost (``resources.doctor``: per step and its share of the step, and its
one-off work), and the sampler's CPU per second. ``--compare-src DIR`` adds the doctor of another
checkout's ``src`` as a third contender in the same cycles. ``--lock FILE`` holds ``flock(FILE)``
for each round (benchmarks sharing a machine take turns).

    .venv/bin/python benchmarks/doctor_overhead.py [--steps 2000] [--block 25] [--rounds 4] [--matmuls 12]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
from contextlib import ExitStack
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

TRAIN = """
import sys, time, torch
from torch.utils.data import DataLoader, TensorDataset

steps, workers, matmuls, block, fifo = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
torch.set_num_threads(1)
w = torch.randn(256, 256)
loader = DataLoader(TensorDataset(torch.randn((steps + 1) * 32, 256)), batch_size=32, num_workers=workers)
batches = iter(loader)
next(batches)  # warm: workers forked, the first batch made
done = open(fifo + ".done", "w")  # the controller opens .done, then .go
go = open(fifo + ".go", "rb", buffering=0)
done.write("ready\\n")
done.flush()
t0 = None
for i, (x,) in enumerate(batches):
    if i % block == 0:
        if t0 is not None:
            done.write(f"{time.perf_counter() - t0:.9f}\\n")
            done.flush()
        go.read(1)
        t0 = time.perf_counter()
    for _ in range(matmuls):
        x = x @ w
done.write(f"{time.perf_counter() - t0:.9f}\\n")
done.flush()
"""


# a tree's threads: the script's main thread, its other threads, its workers, the doctor's own process
ROLES = ("script", "script threads", "workers", "doctor")


class Contender:
    """One process tree running the script, stopped but between its blocks."""

    def __init__(self, name: str, cmd: list[str], fifo: Path, env: dict[str, str] | None) -> None:
        self.name, self.fifo = name, fifo
        os.mkfifo(f"{fifo}.done")
        os.mkfifo(f"{fifo}.go")
        self.proc = subprocess.Popen([*cmd, str(fifo)], env=env, stdout=subprocess.DEVNULL)
        self.tree: list[psutil.Process] = []

    def ready(self) -> None:
        """Wait for the warmed-up script; stop its tree."""
        self.done = open(f"{self.fifo}.done")
        self.go = open(f"{self.fifo}.go", "wb", buffering=0)
        if self.done.readline() != "ready\n":
            raise RuntimeError(f"{self.name}: the script ended before its loop (exit {self.proc.wait()})")
        root = psutil.Process(self.proc.pid)
        self.tree = [root, *root.children(recursive=True)]
        script = next(p for p in self.tree if p.cmdline()[1:2] == [str(self.fifo.parent.parent / "train.py")])
        workers = {p.pid for p in script.children(recursive=True)}
        self.role = {p.pid: "script" if p == script else "workers" if p.pid in workers else "doctor" for p in self.tree}
        self.signal(signal.SIGSTOP)

    def signal(self, sig: int) -> None:
        for p in self.tree:
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass

    def cpu(self) -> dict[tuple[int, str], int]:
        """Nanoseconds on a CPU of each thread of the tree (``/proc/PID/task/TID/schedstat``)."""
        ns = {}
        for p in self.tree:
            try:
                for tid in os.listdir(f"/proc/{p.pid}/task"):
                    with open(f"/proc/{p.pid}/task/{tid}/schedstat") as f:
                        ns[p.pid, tid] = int(f.read().split()[0])
            except FileNotFoundError:  # a thread or process that ended: its last slice is lost
                pass
        return ns

    def block(self) -> tuple[float, float, dict[str, float]]:
        """Run one block: (wall seconds the script timed, CPU seconds of its tree meanwhile, those by role)."""
        c0 = self.cpu()
        self.signal(signal.SIGCONT)
        self.go.write(b"g")
        line = self.done.readline()
        self.signal(signal.SIGSTOP)
        if not line:
            raise RuntimeError(f"{self.name}: the script ended early (exit {self.proc.wait()})")
        c1 = self.cpu()
        roles = dict.fromkeys(ROLES, 0.0)
        for (pid, tid), ns in c1.items():
            role = self.role[pid] + (" threads" if self.role[pid] == "script" and str(pid) != tid else "")
            roles[role] += (ns - c0.get((pid, tid), 0)) / 1e9
        return float(line), sum(roles.values()), roles

    def finish(self) -> None:
        self.signal(signal.SIGCONT)
        if self.proc.wait() != 0:
            raise RuntimeError(f"{self.name}: exit code {self.proc.returncode}")

    def kill(self) -> None:
        self.signal(signal.SIGCONT)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def median_interval(xs: list[float]) -> tuple[float, float]:
    """A 95 % interval of the median of ``xs`` from its order statistics (distribution-free)."""
    n, xs = len(xs), sorted(xs)
    k, tail = 0, 0.0
    while k < n and tail + math.comb(n, k) / 2**n <= 0.025:
        tail += math.comb(n, k) / 2**n
        k += 1
    return (xs[k - 1], xs[n - k]) if k > 0 else (xs[0], xs[-1])


def slowdown(pairs: list[tuple[float, float]], resamples: int = 2000) -> tuple[float, float, float]:
    """sum(doctor) / sum(bare) - 1 over the cycles, and its 95 % bootstrap interval (cycles resampled)."""
    rng = random.Random(0)
    whole = sum(d for _, d in pairs) / sum(b for b, _ in pairs) - 1
    boot = []
    for _ in range(resamples):
        pick = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        boot.append(sum(d for _, d in pick) / sum(b for b, _ in pick) - 1)
    boot.sort()
    return whole, boot[int(0.025 * resamples)], boot[int(0.975 * resamples) - 1]


def judge(label: str, pairs: list[tuple[float, float]]) -> str:
    """The loop's slowdown with its interval, the median per-cycle difference, and what they show."""
    whole, lo, hi = slowdown(pairs)
    diffs = [d / b - 1 for b, d in pairs]
    q1, med, q3 = statistics.quantiles(diffs, n=4, method="inclusive")
    mlo, mhi = median_interval(diffs)
    shown = "<= 2 % shown" if max(hi, mhi) <= 0.02 else "<= 2 % not shown"
    noise = "; within noise" if lo <= 0 <= hi else "; beyond noise"
    return (
        f"{label}: {100 * whole:+.2f} % [{100 * lo:+.2f}, {100 * hi:+.2f}] (sums, 95 % bootstrap); per cycle median "
        f"{100 * med:+.2f} % [{100 * mlo:+.2f}, {100 * mhi:+.2f}] (95 %), quartiles [{100 * q1:+.1f}, {100 * q3:+.1f}]"
        f": {shown}{noise}"
    )


def one_round(contenders: dict[str, tuple[list[str], str | None]], blocks: int, tmp: Path) -> dict[str, list]:
    """Start every contender, run ``blocks`` cycles; per contender its (wall, CPU) per cycle."""
    out: dict[str, list] = {name: [] for name in contenders}
    tmp.mkdir()
    with ExitStack() as stack:
        running = []
        for i, (name, (cmd, src)) in enumerate(contenders.items()):
            env = None if src is None else {**os.environ, "PYTHONPATH": src}
            running.append(Contender(name, cmd, tmp / f"c{i}", env))
            stack.callback(running[-1].kill)
        for c in running:
            c.ready()
        for cycle in range(blocks):
            k = cycle % len(running)
            for c in running[k:] + running[:k]:
                out[c.name].append(c.block())
        for c in running:
            c.finish()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="steps of the loop per round")
    ap.add_argument("--block", type=int, default=25, help="steps a contender runs before the next one's turn")
    ap.add_argument("--rounds", type=int, default=4, help="fresh sets of processes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--matmuls", type=int, default=12, help="256x256 matmuls per step (12: ~2 ms a step here)")
    ap.add_argument("--compare-src", help="the src directory of another stoker checkout: its doctor runs too")
    ap.add_argument("--lock", help="a file to flock for each round (benchmarks on one machine take turns)")
    args = ap.parse_args()
    blocks = math.ceil(args.steps / args.block)
    if args.block < 1 or blocks < 4:
        ap.error("--block must be >= 1 and --steps at least 4 blocks")
    script = Path(tempfile.mkdtemp(prefix="doctor-overhead-")) / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    bare = [sys.executable, str(script), str(args.steps), str(args.workers), str(args.matmuls), str(args.block)]
    reports = {}
    here = str(Path(__file__).resolve().parents[1] / "src")
    contenders: dict[str, tuple[list[str], str | None]] = {"bare": (bare, None)}
    for name, src in [("doctor", here), (f"doctor of {args.compare_src}", args.compare_src)]:
        if src:
            reports[name] = script.parent / f"report-{len(reports)}"
            doctor = [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(reports[name]), "--no-html"]
            contenders[name] = ([*doctor, "--no-trace", "--", *bare], str(Path(src).resolve()))
    print(
        f"{machine()}; {args.steps} steps of {args.matmuls} matmuls, DataLoader num_workers={args.workers}, "
        f"{args.rounds} rounds of {blocks} cycles of {args.block}-step blocks"
    )
    runs: dict[str, list[tuple[float, float, dict[str, float]]]] = {name: [] for name in contenders}
    own: dict[str, list[dict]] = {name: [] for name in reports}
    loads = []
    for r in range(args.rounds):
        with ExitStack() as stack:
            if args.lock:
                fcntl.flock(stack.enter_context(open(args.lock, "w")), fcntl.LOCK_EX)
            loads.append(os.getloadavg()[0])
            cycles = one_round(contenders, blocks, script.parent / f"r{r}")
            loads.append(os.getloadavg()[0])
        for name, got in cycles.items():
            runs[name] += got
        for name, path in reports.items():
            report = json.loads((path / "report.json").read_text())
            own[name].append({**report["resources"]["doctor"], "wall_s": report["wall_s"]})
        step_ms = 1000 * sum(g[0] for g in cycles["bare"]) / args.steps
        print(
            f"round {r + 1}: bare step {step_ms:.2f} ms; "
            + ", ".join(
                f"{n} {sum(g[0] for g in got):.3f} s ({sum(g[1] for g in got):.3f} CPU-s)" for n, got in cycles.items()
            )
            + f"; load {loads[-2]:.1f}-{loads[-1]:.1f}",
            flush=True,
        )
    print(f"load average (1 min) over the rounds: {min(loads):.1f}-{max(loads):.1f}")
    for name, cost in own.items():
        print(f"{name} against bare ({len(runs['bare'])} cycles):")
        print("  " + judge("loop wall", [(b[0], d[0]) for b, d in zip(runs["bare"], runs[name])]))
        print("  " + judge("loop CPU of the tree", [(b[1], d[1]) for b, d in zip(runs["bare"], runs[name])]))
        steps = args.steps * args.rounds
        extra = {
            role: 1e6 * (sum(d[2][role] for d in runs[name]) - sum(b[2][role] for b in runs["bare"])) / steps
            for role in ROLES
        }
        print("  the doctor's CPU per step, measured: " + ", ".join(f"{r} {us:+.1f} us" for r, us in extra.items()))
        sampler = statistics.median(c["sampler_cpu_s"] / c["wall_s"] for c in cost)
        us, share = [c["step_us"] for c in cost], [c["step_share"] for c in cost]
        print(
            f"  the report's own estimate: {statistics.median(us):.1f} us per step ({min(us):.1f}-{max(us):.1f}), "
            f"{100 * statistics.median(share):.2f} % of the step, the sampler {sampler:.4f} CPU-s per second "
            "(median and range over the rounds; inflated here: the stops count in its clocks)"
        )


if __name__ == "__main__":
    main()
