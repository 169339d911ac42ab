"""Online chunk sizing (issue 19): the "auto" loader with its chunk size tuned, against the same loader
with the chunk size left to the default sizing (the tuner before it moved chunks), and a grid of fixed
settings over workers x chunk size, side by side in one run.

A chunk is the batches one worker task reads (``chunk_size``); by default about 1 MiB of data, 64
batches at most. With ``num_workers="auto"`` (or ``prefetch_factor="auto"``) and no ``chunk_size``, the
online tuner grows it while tasks are short and the consumer waits (``pipeline/autotune_policy.py``).

Workloads (small rows and cheap reads, where a task's hand-off weighs; and one where it does not):
  mnist     the MNIST store (``data/stores/mnist``: 28x28 uint8 + label), batch 256 (200 KB a batch: 5 a
            default chunk)
  friends   the token store (``data/stores/friends``) through stoker.text.Loader, batch 64 (64 a chunk)
  fly       on-the-fly text, 8,000 lines of ``data/text/friends.txt`` (bench_tune.py's), batch 64
  photos    the encoded JPEG store with RandomResizedCrop(224) + flip, batch 32 (4.8 MB a batch, tasks of
            tens of ms): nothing for chunks to win, a check that the tuner leaves them alone
Per workload:
  grid      fixed settings, 0 / 1 / 2 worker threads x chunks of 1x, 4x and 16x the default's bytes,
            one trial each (``stoker.tune.trial.run_trial``: every later pass's start timed); its best
            rate is the target
  rounds    in turns (the order swapped each round): ``tuned`` (num_workers and prefetch_factor "auto":
            chunks tuned) and ``default chunks`` (the same, the tuner's chunk knob held), each read for
            RAMP_S seconds with no step: rows/s over the last 5 s (/ the grid's best), and the time until
            the rate over the trailing 2 s first reaches 0.9x the grid's best
Printed: per round, and the median of tuned / default chunks over the rounds.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_tune_chunks.py [--data data]
        [--only mnist,friends] [--rounds 3] [--json out.json] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from bench_tune import workloads as tune_workloads  # run from benchmarks/, as every bench script
from bench_tune_online import AUTO, TRAIL_S, Log, read_for
from stoker.pipeline.tuning import CHUNK_BYTES, chunk_size
from stoker.tune.loaders import plan_for
from stoker.tune.trial import run_trial

RAMP_S = 12.0
SCALES = (1, 4, 16)  # grid chunks: these times the default's bytes
WORKERS = (0, 1, 2)


def workloads(data: Path) -> list[tuple[str, int, Any]]:
    """(name, batch size, make) of each workload."""
    mnist = ("mnist", 256, plan_for(data / "stores" / "mnist", 256).make)
    others = {name: (name, batch, make) for name, _, batch, _, _, make in tune_workloads(data)}
    return [mnist, others["friends"], others["fly"], others["photos"]]


def batch_bytes(make: Any, batch: int) -> float:
    """A batch's bytes: the source's figure, else measured on the first batch."""
    loader = make({"num_workers": 0})
    try:
        known = loader.source.batch_bytes(batch)
        if known is None:
            from stoker.pipeline.tuning import nbytes

            it = iter(loader)
            known = float(nbytes(next(it)))
            it.close()
        return float(known)
    finally:
        loader.close()


def grid(make: Any, batch: int, seconds: float) -> list[dict[str, Any]]:
    size = batch_bytes(make, batch)
    out = []
    for workers in WORKERS:
        for scale in SCALES:
            chunk = chunk_size(size, scale * CHUNK_BYTES)
            setting: dict[str, Any] = {"num_workers": workers, "chunk_size": chunk}
            if workers:
                setting["engine"] = "threads"
            trial = run_trial(make, setting, batches=200, step_ms=0.0, min_seconds=seconds)
            out.append({"setting": setting, "scale": scale, "rate": trial.rate or 0.0, "error": trial.error})
    return out


def run(make: Any, best: float, tuned: bool) -> dict[str, Any]:
    loader = make(dict(AUTO))
    try:
        if not tuned:
            loader._tuner.tune_chunk = False  # the tuner before chunks moved: the default sizing
        log = Log(read_for(loader, RAMP_S, lambda t: 0.0))
        tuning = loader.tuning
    finally:
        loader.close()
    end = log.at[-1]
    reached = next((at for at in log.at if at >= TRAIL_S and log.rate(at, TRAIL_S) >= 0.9 * best), None)
    return {
        "last5_rows_per_s": log.rate(end, 5.0),
        "last5_over_best": log.rate(end, 5.0) / best,
        "time_to_0.9x_s": None if reached is None else float(reached),
        "ends_at": str(tuning).splitlines()[0],
        "decisions": [str(d) for d in tuning.decisions],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--only", default=None, help="workloads, comma-separated: mnist, friends, fly, photos")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trial-seconds", type=float, default=1.5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--verbose", action="store_true", help="print the tuner's decisions")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)", flush=True)
    out = []
    for name, batch, make in workloads(Path(args.data)):
        if args.only and name not in args.only.split(","):
            continue
        points = grid(make, batch, args.trial_seconds)
        best = max(points, key=lambda p: p["rate"])
        at_default = max((p for p in points if p["scale"] == 1), key=lambda p: p["rate"])
        print(
            f"{name}: grid best {best['rate']:,.0f} rows/s at {best['setting']}; with default chunks "
            f"{at_default['rate']:,.0f} at {at_default['setting']} ({at_default['rate'] / best['rate']:.2f}x)",
            flush=True,
        )
        rounds = []
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            got = {tuned: run(make, best["rate"], tuned) for tuned in order}
            one = {"tuned": got[True], "default_chunks": got[False], "load": os.getloadavg()[0]}
            one["tuned_over_default_chunks"] = got[True]["last5_rows_per_s"] / got[False]["last5_rows_per_s"]
            rounds.append(one)

            def t09(x: dict[str, Any]) -> str:
                return "never" if x["time_to_0.9x_s"] is None else f"{x['time_to_0.9x_s']:.1f} s"

            print(
                f"  round {r + 1}: tuned {got[True]['last5_over_best']:.2f}x of the grid's best (0.9x at "
                f"{t09(got[True])}; {got[True]['ends_at']}), default chunks {got[False]['last5_over_best']:.2f}x "
                f"(0.9x at {t09(got[False])}; {got[False]['ends_at']}); tuned / default chunks "
                f"{one['tuned_over_default_chunks']:.2f}x; load {one['load']:.2f}",
                flush=True,
            )
            if args.verbose:
                for label, x in (("tuned", got[True]), ("default chunks", got[False])):
                    print(f"    {label}:")
                    for d in x["decisions"]:
                        print(f"      {d}")
        ratios = [x["tuned_over_default_chunks"] for x in rounds]
        tuned_best = [x["tuned"]["last5_over_best"] for x in rounds]
        fixed_best = [x["default_chunks"]["last5_over_best"] for x in rounds]
        print(
            f"{name}: median tuned / default chunks {statistics.median(ratios):.2f}x "
            f"({', '.join(f'{v:.2f}' for v in ratios)}); of the grid's best: tuned {statistics.median(tuned_best):.2f}x, "
            f"default chunks {statistics.median(fixed_best):.2f}x",
            flush=True,
        )
        out.append({"workload": name, "batch": batch, "grid": points, "grid_best": best, "rounds": rounds})
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
