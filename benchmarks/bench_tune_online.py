"""Online tuning (num_workers="auto", prefetch_factor="auto") against a grid of fixed settings, in one run.

Four workloads (the recipes of bench_tune.py / stoker.tune.loaders):
  photos    an encoded JPEG store (``data/stores/photos``), ImageSource with RandomResizedCrop(224) + flip, batch 32
  friends   a token store (``data/stores/friends``) through stoker.text.Loader, batch 64
  fly       on-the-fly text: 8,000 lines of ``data/text/friends.txt`` tokenized by stoker.text.Loader, batch 64
  dataset   a user torch Dataset whose Python ``__getitem__`` crops, flips and scales a 64x64 array, batch 64
For each, in this order:
  grid      stoker.tune's exhaustive grid (workers 0..2x cores x threads|processes x prefetch 1/2/4/8),
            one trial each, with no step (the loader alone sets the pace): its best rate is the target
  ramp      the loader with num_workers="auto", prefetch_factor="auto" (it starts from the default schedule)
            read for RAMP_S seconds with no step: the time until the rate over the trailing TRAIL_S
            seconds first reaches 0.9x the grid's best (target <= 10 s), and the rate over the last
            5 s / the grid's best (the grid searches the engine, the online tuner does not: the
            schedule's default engine stays); and the grid's best
            setting, fixed, read the same way (the grid's best rate is the best of many 1 s trials, so
            noise lifts it: this is what that setting sustains over RAMP_S seconds read like the ramp).
            The grid's trials time each later pass's restart (stoker/tune/trial.py), as the ramp does,
            so the raw figures compare with the grid's best. Each also *steady*: the same figures with
            each restart (the span ending with a later pass's first batch) left out, which shows what
            restarts cost on these short epochs (38-125 batches): the last pass's close, the workers'
            start, the pipeline's fill
  change    the auto loader (fresh) under a simulated step of 4*F ms for CHANGE_AT seconds, then F ms
            (4x faster) for CHANGE_AFTER seconds; F is chosen so that the fast step asks for a third of the
            grid's best rate (with the GIL-holding step, half was more than any fixed setting delivered
            beside it in a first run; the same third for both step kinds, so that they compare).
            Reported: the time after the change until the consumer's wait share over the trailing second
            is under 5 % (target <= 5 s), the wait share over the last 5 s (target < 5 %), and the same
            last-5 s wait share of the grid's best fixed setting run the same way (what a setting reaches
            on this machine), and of the auto loader on the grid best's engine (the online tuner keeps
            the engine it starts with: this separates the engine from the controller), once per step
            kind (--step-kind):
              python  a pure-Python loop holding the GIL for the step (stoker.tune.trial.busy_step): a
                      Python-heavy step, which takes one of the 2 cores and starves the worker threads
              sleep   the consumer's thread blocked with the GIL released for the step (time.sleep): a
                      GPU-bound step, which waits on the device inside torch ops
Other engineers share these 2 cores: rates drift; read the ratios with that in mind, and the load
average printed with them.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_tune_online.py [--data data] [--only photos,fly]
        [--step-kind python,sleep] [--no-ramp] [--no-change] [--persistent]

``--persistent`` builds every loader with ``persistent_workers=True``: a pool of worker processes
then starts once, not at each epoch (on the user Dataset's 64-batch epochs a pool's start is about
8 % of an epoch under the fast step, which the consumer waits for whatever the tuner decides).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench_tune import workloads as tune_workloads  # run from benchmarks/, as every bench script
from stoker.tune import tune
from stoker.tune.trial import busy_step, rows_of

RAMP_S = 15.0
TRAIL_S = 2.0
CHANGE_AT = 8.0
CHANGE_AFTER = 10.0
AUTO = {"num_workers": "auto", "prefetch_factor": "auto"}

Make = Callable[[dict[str, Any]], Any]


def workloads(data: Path) -> list[tuple[str, Path | None, str, Make]]:
    """(name, store or None, kind, make) of bench_tune.py's four workloads (the same data and loaders)."""
    return [(name, store, kind, make) for name, _, _, store, kind, make in tune_workloads(data)]


def sleep_step(ms: float) -> None:
    """Block the calling thread for ``ms`` milliseconds with the GIL released (a GPU-bound step)."""
    if ms > 0:
        time.sleep(ms / 1000.0)


STEPS: dict[str, Callable[[float], None]] = {"python": busy_step, "sleep": sleep_step}


def read_for(
    loader: Any, seconds: float, step_ms: Callable[[float], float], step: Callable[[float], None] = busy_step
) -> list[tuple[float, int, float, float, bool]]:
    """Read ``loader`` (new passes as epochs end) for ``seconds``, running ``step(step_ms(t))`` after each
    batch: per batch (time since start, rows, wait, when its step ended, whether it began a later pass)."""
    out: list[tuple[float, int, float, float, bool]] = []
    t0 = time.perf_counter()
    later = False
    while time.perf_counter() - t0 < seconds:
        it = iter(loader)
        first = later
        while True:
            asked = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            got = time.perf_counter()
            rows = rows_of(batch)
            del batch
            step(step_ms(got - t0))
            out.append((got - t0, rows, got - asked, time.perf_counter() - t0, first))
            first = False
            if time.perf_counter() - t0 >= seconds:
                break
        it.close()
        later = True
    return out


class Log:
    """Per batch: when it came (seconds since the start), its rows, the consumer's wait for it; sums over spans.

    The *steady* rate counts time as ``stoker.tune``'s trials do (``stoker/tune/trial.py``), so that it
    compares with the grid's best: from one step's end to the next, leaving out the span that ends with
    a later pass's first batch (the pass's restart: the previous pass's close, its workers' start, its
    first read)."""

    def __init__(self, rows: list[tuple[float, int, float, float, bool]]) -> None:
        self.at = np.array([r[0] for r in rows])
        self.rows = np.concatenate([[0], np.cumsum([r[1] for r in rows])])
        self.waits = np.concatenate([[0.0], np.cumsum([r[2] for r in rows])])
        done = np.array([r[3] for r in rows])
        spans = np.diff(done, prepend=0.0)
        spans[[r[4] for r in rows]] = 0.0
        self.timed = np.concatenate([[0.0], np.cumsum(spans)])
        self.restarts = int(sum(r[4] for r in rows))

    def _span(self, start: float, end: float) -> tuple[int, int]:
        return int(np.searchsorted(self.at, start, "right")), int(np.searchsorted(self.at, end, "right"))

    def rate(self, end: float, span: float) -> float:
        """Rows per second over ``(end - span, end]``."""
        i, j = self._span(end - span, end)
        return float(self.rows[j] - self.rows[i]) / span

    def steady_rate(self, end: float, span: float) -> float:
        """Rows per second over the batches of ``(end - span, end]``, pass restarts left out (the grid's trials time them: this shows what they cost)."""
        i, j = self._span(end - span, end)
        timed = float(self.timed[j] - self.timed[i])
        return float(self.rows[j] - self.rows[i]) / timed if timed > 0 else 0.0

    def wait_share(self, start: float, end: float) -> float:
        """The consumer's wait over ``(start, end]`` / its length."""
        i, j = self._span(start, end)
        return float(self.waits[j] - self.waits[i]) / (end - start)


def ramp(make: Make, best: float, setting: dict[str, Any] = AUTO) -> dict[str, Any]:
    loader = make(setting)
    try:
        log = Log(read_for(loader, RAMP_S, lambda t: 0.0))
        tuning = getattr(loader, "tuning", None)
    finally:
        loader.close()
    reached = next((at for at in log.at if at >= TRAIL_S and log.rate(at, TRAIL_S) >= 0.9 * best), None)
    steady = next((at for at in log.at if at >= TRAIL_S and log.steady_rate(at, TRAIL_S) >= 0.9 * best), None)
    end = log.at[-1]
    return {
        "time_to_0.9x_s": None if reached is None else float(reached),
        "last5_over_best": log.rate(end, 5.0) / best,
        "steady_time_to_0.9x_s": None if steady is None else float(steady),
        "steady_last5_over_best": log.steady_rate(end, 5.0) / best,
        "pass_restarts": log.restarts,
        "settings": None if tuning is None else (tuning.workers, tuning.prefetch),
        "decisions": [] if tuning is None else [str(d) for d in tuning.decisions],
    }


def change(make: Make, setting: dict[str, Any], fast_ms: float, step: Callable[[float], None]) -> dict[str, Any]:
    loader = make(setting)
    try:
        steps = lambda t: 4 * fast_ms if t < CHANGE_AT else fast_ms  # noqa: E731
        log = Log(read_for(loader, CHANGE_AT + CHANGE_AFTER, steps, step))
        tuning = getattr(loader, "tuning", None)
    finally:
        loader.close()
    end = log.at[-1]
    readapt = next(
        (at - CHANGE_AT for at in log.at if at >= CHANGE_AT + 1.0 and log.wait_share(at - 1.0, at) < 0.05), None
    )
    return {
        "readapt_s": None if readapt is None else float(readapt),
        "wait_before": log.wait_share(CHANGE_AT - 3.0, CHANGE_AT),
        "wait_last5": log.wait_share(end - 5.0, end),
        "settings": None if tuning is None else (tuning.workers, tuning.prefetch),
        "decisions": [] if tuning is None else [str(d) for d in tuning.decisions],
    }


def keeping_workers(make: Make) -> Make:
    """``make`` with ``persistent_workers=True`` added to every setting (``--persistent``)."""
    return lambda setting: make({**setting, "persistent_workers": True})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--only", default=None, help="workloads, comma-separated: photos, friends, fly, dataset")
    ap.add_argument(
        "--step-kind", default="python,sleep", help="the change phase's steps, comma-separated: python, sleep"
    )
    ap.add_argument("--no-ramp", action="store_true", help="skip the ramp phases (grid and change only)")
    ap.add_argument("--no-change", action="store_true", help="skip the change phases (grid and ramp only)")
    ap.add_argument("--trial-seconds", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--verbose", action="store_true", help="print the tuner's decisions")
    ap.add_argument(
        "--persistent",
        action="store_true",
        help="every loader (grid, auto, fixed) with persistent_workers=True: worker processes kept between epochs",
    )
    args = ap.parse_args()
    kinds = [] if args.no_change else args.step_kind.split(",")
    unknown = [k for k in kinds if k not in STEPS]
    if unknown:
        ap.error(f"--step-kind {','.join(unknown)}: not one of {', '.join(STEPS)}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    print(
        f"{'workload':<9} {'grid best r/s':>13} {'ramp: t(0.9x)':>13} {'last5/best':>10} {'auto ends at':>12} "
        f"{'step':>6} {'step ms':>9} {'readapt s':>9} {'wait before':>11} {'wait last5':>10} {'fixed best wait':>15}"
        "  load"
    )
    out = []
    for name, store, kind, make in workloads(Path(args.data)):
        if args.only and name not in args.only.split(","):
            continue
        if args.persistent:
            make = keeping_workers(make)
        batch = 32 if name == "photos" else 64
        grid = tune(store, method="grid", batch_size=batch, trial_seconds=args.trial_seconds, make=make, kind=kind)
        assert grid.best is not None and grid.best.rate, "every grid trial failed"
        best, best_setting = grid.best.rate, grid.best.setting
        fast_ms = 1000.0 * batch / (best / 3)  # the fast step asks for a third of the grid's best rate
        row: dict[str, Any] = {
            "workload": name,
            "grid_best_rows_per_s": best,
            "grid_best": best_setting,
            "grid": [t.to_json() for t in grid.trials],
            "fast_step_ms": fast_ms,
        }
        ramp_text = f"{'-':>13} {'-':>10} {'-':>12}"
        if not args.no_ramp:
            r = row["ramp"] = ramp(make, best)
            r_fixed = row["ramp_fixed_best"] = ramp(make, best, best_setting)
            t09 = r["time_to_0.9x_s"]
            ramp_text = (
                f"{'never' if t09 is None else f'{t09:.1f} s':>13} {r['last5_over_best']:>10.2f} "
                f"{str(r['settings']):>12}"
            )
            print(
                f"{name:<9} {best:>13,.0f} {ramp_text}   (grid best {best_setting}; "
                f"the grid's best fixed, read the same way: last5/best {r_fixed['last5_over_best']:.2f})",
                flush=True,
            )

            def steady(r: dict[str, Any]) -> str:
                t = r["steady_time_to_0.9x_s"]
                return f"t(0.9x) {'never' if t is None else f'{t:.1f} s'}, last5/best {r['steady_last5_over_best']:.2f}"

            print(
                f"{'':<9} steady (pass restarts left out; the grid's trials time them): auto {steady(r)}; "
                f"the grid's best fixed {steady(r_fixed)}; "
                f"pass restarts in 15 s: {r['pass_restarts']}, {r_fixed['pass_restarts']}; "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        for step_kind in kinds:
            c = row[f"change_{step_kind}"] = change(make, AUTO, fast_ms, STEPS[step_kind])
            fixed = row[f"fixed_best_change_{step_kind}"] = change(make, best_setting, fast_ms, STEPS[step_kind])
            same = {**AUTO, "engine": best_setting.get("engine")}  # the online tuner keeps the engine
            c_same = row[f"change_{step_kind}_grid_engine"] = change(make, same, fast_ms, STEPS[step_kind])
            load = row[f"load_{step_kind}"] = os.getloadavg()[0]
            readapt, fixed_readapt, same_readapt = c["readapt_s"], fixed["readapt_s"], c_same["readapt_s"]
            print(
                f"{name:<9} {best:>13,.0f} {ramp_text} {step_kind:>6} {f'{4 * fast_ms:.1f}->{fast_ms:.1f}':>9} "
                f"{'never' if readapt is None else f'{readapt:.1f}':>9} {c['wait_before']:>11.1%} "
                f"{c['wait_last5']:>10.1%} {fixed['wait_last5']:>15.1%}  {load:.2f}   (grid best {best_setting}; "
                f"auto ends at {c['settings']}; fixed best: wait before {fixed['wait_before']:.1%}, "
                f"readapt {'never' if fixed_readapt is None else f'{fixed_readapt:.1f} s'}; auto on the grid best's "
                f"engine: readapt {'never' if same_readapt is None else f'{same_readapt:.1f} s'}, "
                f"wait last5 {c_same['wait_last5']:.1%}, ends at {c_same['settings']})",
                flush=True,
            )
        out.append(row)
        if args.verbose:
            phases = [p for p in ("ramp",) if p in row]
            phases += [f"change_{k}{e}" for k in kinds for e in ("", "_grid_engine")]
            for phase in phases:
                print(f"  {phase}:")
                for d in row[phase]["decisions"]:
                    print(f"    {d}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
