"""The offline tuner against the exhaustive grid (issue 19): side by side, in one run.

Four workloads, each under a light (0 ms) and a heavy (30 ms) simulated step (a pure-Python loop
holding the GIL after each batch):
  photos    an encoded JPEG store (``data/stores/photos``) through ImageSource with the training
            transforms, RandomResizedCrop(224) + flip, batch 32
  friends   a token store (``data/stores/friends``) through stoker.text.Loader, batch 64
  fly       on-the-fly text: 8,000 lines of ``data/text/friends.txt`` tokenized by
            stoker.text.Loader (BERT WordPiece ``data/text/vocab.txt``, max_length 128, bucketing), batch 64
  dataset   a user torch Dataset whose Python ``__getitem__`` crops, flips and scales a 64x64
            array per sample (numpy), batch 64
For each, in this order:
  grid    every setting of the tuner's space (workers 0..2x cores, threads|processes, prefetch
          1/2/4/8; settings that do not apply without workers left out), one full trial each
  tuner   stoker.tune.tune's search from the defaults
Reported:
  tuner/grid  the tuner's choice as the grid measured it / the grid's best (one noisy trial each)
  h2h     the tuner's choice over the grid's best, measured again in PAIRS interleaved pairs of
          short trials (half --trial-seconds each, the order swapped every pair): the median of the
          pairs' ratios and the order-statistic interval holding the true median with >= 90 %
          probability. Target: >= 0.95 ("met" when the interval's low end is >= 0.95, "missed"
          when its high end is below, else "open": the noise here cannot tell)
  time share  the tuner's search time / the grid's (``TuneResult.search_seconds``: every loader
          the search built and every trial it ran, confirmations included, the limits left out;
          target <= 0.20)
  dflt h2h    the defaults (no keyword given) over the grid's best, the same way (target >= 0.80)
Other engineers share these 2 cores: rates drift between trials; the pairs and the interval are
there so that a ratio comes with its spread.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_tune.py [--data data] [--json out.json]

``--dataset-engines`` measures only the user Dataset's defaults (process workers) against no
worker, one and two worker threads, in interleaved pairs as above, as ratios over the defaults.

``--inline`` measures only the default rule for small store batches (read inline, under
``INLINE_BYTES``): 0 vs 1 vs 2 worker threads on the token store and the MNIST store, 3 full
trials each, alternating, as ratios over inline.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import stoker
import stoker.text
from stoker.tune import tune
from stoker.tune.loaders import plan_for
from stoker.tune.trial import run_trial

STEPS = (0.0, 30.0)
ROUNDS = 3  # --inline: full trials of each contender
PAIRS = 8  # head-to-head: interleaved pairs of short trials per comparison
PAIR_SHARE = 0.5  # a head-to-head trial times this share of --trial-seconds (and at least --trial-batches)
FLY_LINES = 8000


class Patches(torch.utils.data.Dataset):
    """A user Dataset: per sample a random 48x48 crop of a 64x64 image, a flip, a float scale (numpy)."""

    def __init__(self, n: int = 4096) -> None:
        self.images = np.random.default_rng(0).integers(0, 255, size=(256, 64, 64, 3), dtype=np.uint8)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        rng = np.random.default_rng(i)
        y, x = (int(v) for v in rng.integers(0, 16, size=2))
        crop = self.images[i % len(self.images), y : y + 48, x : x + 48]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        pixels = (crop.astype(np.float32) / 255.0 - 0.5) / 0.25
        return {"x": torch.from_numpy(np.ascontiguousarray(pixels)), "y": i % 10}


Make = Callable[[dict[str, Any]], Any]


def workloads(data: Path) -> list[tuple[str, str, int, Path | None, str, Make]]:
    """(name, what, batch size, store or None, kind, make) of each workload."""
    photos, friends = data / "stores" / "photos", data / "stores" / "friends"
    lines = (data / "text" / "friends.txt").read_text(encoding="utf-8").splitlines()[:FLY_LINES]
    vocab = str(data / "text" / "vocab.txt")
    dataset = Patches()

    def fly(setting: dict[str, Any]) -> Any:
        return stoker.text.Loader(
            lines, tokenizer=vocab, batch_size=64, max_length=128, shuffle=True, seed=0, **setting
        )

    def user(setting: dict[str, Any]) -> Any:
        return stoker.Loader(dataset, 64, shuffle=True, seed=0, **setting)

    return [
        ("photos", "encoded JPEG store", 32, photos, "images", plan_for(photos, 32).make),
        ("friends", "token store", 64, friends, "text", plan_for(friends, 64).make),
        ("fly", "on-the-fly text", 64, None, "text", fly),
        ("dataset", "user Dataset", 64, None, "plain", user),
    ]


def one(
    store: Path | None, kind: str, make: Make, batch_size: int, step_ms: float, trial_batches: int, trial_seconds: float
) -> dict[str, Any]:
    common = {"batch_size": batch_size, "step_ms": step_ms, "trial_batches": trial_batches, "make": make, "kind": kind}
    t0 = time.perf_counter()
    grid = tune(store, method="grid", trial_seconds=trial_seconds, **common)
    grid_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    tuner = tune(store, trial_seconds=trial_seconds, **common)
    tuner_wall = time.perf_counter() - t0
    rates = {json.dumps(t.setting, sort_keys=True): t.rate or 0.0 for t in grid.trials}
    grid_best = max(rates.values())
    chosen = tuner.best.setting if tuner.best else {}
    chosen_in_grid = rates.get(json.dumps(chosen, sort_keys=True))
    defaults_in_grid = rates.get(json.dumps(tuner.defaults_setting, sort_keys=True))
    assert grid.best is not None, "every grid trial failed"
    length = (trial_batches, trial_seconds * PAIR_SHARE)
    head = head_to_head(make, step_ms, length, grid.best.setting, chosen)
    defaults = {} if tuner.defaults_setting != grid.best.setting else grid.best.setting  # {}: no keyword given
    defaults_h2h = head_to_head(make, step_ms, length, grid.best.setting, defaults)
    grid_time = sum(t.seconds for t in grid.trials)
    tuner_time = sum(t.seconds for t in tuner.trials)
    return {
        "step_ms": step_ms,
        "grid_trials": len(grid.trials),
        "tuner_trials": len(tuner.trials),
        "grid_best": grid.best.setting if grid.best else None,
        "grid_best_rate": grid_best,
        "tuner_best": chosen,
        "tuner_best_own_rate": tuner.best.rate if tuner.best else None,
        "tuner_choice_in_grid_over_grid_best": None if chosen_in_grid is None else chosen_in_grid / grid_best,
        "tuner_own_over_grid_best": (tuner.best.rate or 0) / grid_best if tuner.best else None,
        "tuner_time_over_grid_time": _search(tuner) / _search(grid),
        "tuner_trial_time_over_grid_trial_time": tuner_time / grid_time,
        "head_to_head_tuner_over_grid_best": head,
        "tuner_search_s": _search(tuner),
        "grid_search_s": _search(grid),
        "tuner_wall_s": tuner_wall,
        "grid_wall_s": grid_wall,
        "defaults": tuner.defaults_setting,
        "defaults_over_grid_best": None if defaults_in_grid is None else defaults_in_grid / grid_best,
        "head_to_head_defaults_over_grid_best": defaults_h2h,
        "tuner_share_of_limit": tuner.share_of_limit,
        "call": tuner.call,
        "tuner_trials_detail": [t.to_json() for t in tuner.trials],
        "grid_trial_seconds_mean": grid_time / max(1, len(grid.trials)),
    }


def _search(result: Any) -> float:
    """Seconds the search ran: everything it built and measured (confirming trials too), the
    limits' trial left out (both the grid and the tuner measure the same limits)."""
    return float(result.search_seconds)


def head_to_head(make: Make, step_ms: float, length: tuple[int, float], reference: Any, other: Any) -> dict[str, Any]:
    """``other``'s rate over ``reference``'s, measured in PAIRS interleaved pairs of short trials.

    Each pair runs both settings back to back (the order swapped every pair, so that a drift of
    the machine's load favours neither) and gives one ratio; the result is the median ratio, its
    quartiles and the order-statistic interval that holds the true median with >= 90 %
    probability (:func:`median_interval`). The same setting on both sides is 1.0 without a run."""
    if reference == other:
        return {"median": 1.0, "q1": 1.0, "q3": 1.0, "lo": 1.0, "hi": 1.0, "pairs": 0, "same": True}
    ratios = []
    for i in range(PAIRS):
        order = ((0, reference), (1, other)) if i % 2 == 0 else ((1, other), (0, reference))
        rate = [0.0, 0.0]
        for side, setting in order:
            trial = run_trial(make, setting, batches=length[0], step_ms=step_ms, min_seconds=length[1])
            rate[side] = trial.rate or 0.0
        ratios.append(rate[1] / rate[0] if rate[0] else float("nan"))
    ratios.sort()
    lo, hi = median_interval(ratios)
    return {
        "median": float(np.median(ratios)),
        "q1": float(np.quantile(ratios, 0.25)),
        "q3": float(np.quantile(ratios, 0.75)),
        "lo": lo,
        "hi": hi,
        "pairs": len(ratios),
        "ratios": ratios,
    }


def median_interval(ordered: list[float], confidence: float = 0.90) -> tuple[float, float]:
    """The distribution-free interval of the median: order statistics ``(x_k, x_{n-k+1})`` with the
    largest ``k`` whose binomial coverage is still >= ``confidence`` (pairs independent)."""
    n = len(ordered)
    best = 1
    for k in range(1, n // 2 + 1):
        miss = 2 * sum(math.comb(n, j) for j in range(k)) / 2**n  # P(median outside [x_k, x_{n-k+1}])
        if 1 - miss >= confidence:
            best = k
    return ordered[best - 1], ordered[n - best]


def verdict(h2h: dict[str, Any], target: float) -> str:
    """``met`` when the interval's low end is >= ``target``, ``missed`` when its high end is below, else ``open``."""
    if h2h["lo"] >= target:
        return "met"
    return "missed" if h2h["hi"] < target else "open"


def inline_vs_threads(data: Path, steps: list[float], batches: int, seconds: float) -> list[dict[str, Any]]:
    """Small store batches (under INLINE_BYTES, read inline by default): 0 vs 1 vs 2 worker threads,
    ROUNDS full trials each, alternating; rates over the inline one's."""
    stores = (("friends", "token store", 64), ("mnist", "plain store (28x28 uint8)", 256))
    out = []
    for name, what, batch in stores:
        path = data / "stores" / name
        if not path.is_dir():
            continue
        make = plan_for(path, batch).make
        for step in steps:
            rates: dict[int, list[float]] = {0: [], 1: [], 2: []}
            for _ in range(ROUNDS):
                for workers in rates:
                    trial = run_trial(
                        make, {"num_workers": workers}, batches=batches, step_ms=step, min_seconds=seconds
                    )
                    rates[workers].append(trial.rate or 0.0)
            mean = {w: sum(r) / len(r) for w, r in rates.items()}
            row = {"workload": f"{what} ({name}, batch {batch})", "step_ms": step, "inline_rows_per_s": mean[0]}
            row.update({f"{w}_threads_over_inline": mean[w] / mean[0] for w in (1, 2)})
            out.append(row)
            print(
                f"{name + ' ' + what:<40} {step:>5.0f} {mean[0]:>13,.0f} "
                f"{row['1_threads_over_inline']:>9.2f} {row['2_threads_over_inline']:>9.2f}",
                flush=True,
            )
    return out


def dataset_engines(data: Path, steps: list[float], batches: int, seconds: float) -> list[dict[str, Any]]:
    """The user Dataset's defaults (process workers, one per core) against threads and inline
    reads: each over the defaults in interleaved pairs (``head_to_head``)."""
    make = next(w[5] for w in workloads(data) if w[0] == "dataset")
    others = ({"num_workers": 0}, {"num_workers": 1, "engine": "threads"}, {"num_workers": 2, "engine": "threads"})
    out = []
    for step in steps:
        for setting in others:
            h = head_to_head(make, step, (batches, seconds * PAIR_SHARE), {}, setting)
            out.append({"step_ms": step, "setting": setting, "over_defaults": h})
            print(f"{step:>5.0f}  {json.dumps(setting):<44} {_ci(h)}", flush=True)
    return out


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _ci(h2h: dict[str, Any]) -> str:
    if h2h.get("same"):
        return "same setting"
    return f"{h2h['median']:.2f} [{h2h['lo']:.2f}-{h2h['hi']:.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--trial-batches", type=int, default=10)
    ap.add_argument("--trial-seconds", type=float, default=1.0)
    ap.add_argument("--only", default=None, help="workloads, comma-separated: photos, friends, fly, dataset")
    ap.add_argument("--steps", default="0,30", help="simulated steps in ms (default 0,30)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--inline", action="store_true", help="only: small store batches inline vs 1 and 2 threads")
    ap.add_argument(
        "--dataset-engines", action="store_true", help="only: the user Dataset's defaults vs threads and inline"
    )
    args = ap.parse_args()
    steps = [float(s) for s in args.steps.split(",")]
    if args.dataset_engines:
        print(f"{'step':>5}  {'setting':<44} over the defaults (processes): median [90% CI]")
        found = dataset_engines(Path(args.data), steps, args.trial_batches, args.trial_seconds)
        if args.json:
            Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
        return
    if args.inline:
        print(f"{'workload':<40} {'step':>5} {'inline r/s':>13} {'1 thread':>9} {'2 threads':>9}  (x inline)")
        found = inline_vs_threads(Path(args.data), steps, args.trial_batches, args.trial_seconds)
        if args.json:
            Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
        return
    out = []
    print(
        f"{'workload':<28} {'step':>5} {'grid best r/s':>13} {'tuner/grid':>10} {'h2h median [90% CI]':>22} "
        f"{'time share':>10} {'trials':>7} {'dflt h2h median [90% CI]':>26}  tuner's choice"
    )
    t_run = time.perf_counter()
    for name, what, batch, store, kind, make in workloads(Path(args.data)):
        if args.only and name not in args.only.split(","):
            continue
        for step in steps:
            r = one(store, kind, make, batch, step, args.trial_batches, args.trial_seconds)
            r["workload"] = f"{what} ({name}, batch {batch})"
            h, d = r["head_to_head_tuner_over_grid_best"], r["head_to_head_defaults_over_grid_best"]
            r["verdict_tuner_within_5pct"] = verdict(h, 0.95)
            r["verdict_defaults_within_20pct"] = verdict(d, 0.80)
            out.append(r)
            print(
                f"{name + ' ' + what:<28} {step:>5.0f} {r['grid_best_rate']:>13,.0f} "
                f"{_f(r['tuner_choice_in_grid_over_grid_best']):>10} {_ci(h):>22} "
                f"{_f(r['tuner_time_over_grid_time']):>10} {r['tuner_trials']:>3}/{r['grid_trials']:<3} "
                f"{_ci(d):>26}  {r['tuner_best']}  (grid best {r['grid_best']}; defaults {r['defaults']}; "
                f"search {r['tuner_search_s']:.1f} s / {r['grid_search_s']:.1f} s; "
                f"within 5 %: {r['verdict_tuner_within_5pct']}, defaults within 20 %: "
                f"{r['verdict_defaults_within_20pct']})",
                flush=True,
            )
    print(f"run: {time.perf_counter() - t_run:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
