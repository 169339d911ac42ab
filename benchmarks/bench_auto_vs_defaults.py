"""``num_workers="auto", prefetch_factor="auto"`` against the defaults, as a user times them.

Issue 32: the ``"auto"`` settings must not lose to the defaults (>= 0.97x). For each of
bench_tune.py's four workloads (the JPEG store at batch 32, the token store, on-the-fly text, a user
``Dataset``), each round builds a loader with no keyword (the defaults) and one with both ``"auto"``,
in alternating order (A B, B A, ...), and times each from construction to the end of ``--epochs``
whole epochs, with a training-like step of ``--step-ms`` (pure Python, holding the GIL, as
``stoker.tune.trial.busy_step``) after each batch. Reported per workload: rows/s of each (median
and range over the rounds), the median of the per-round ratios auto / defaults with their range, and
"within noise" when the two ranges of rates overlap. Time to the first batch is shown beside.

Run from the repository root (stores from ``stoker demo``, or built as the lead did:
``stoker.convert.images(data/images/photos, data/stores/photos)``,
``stoker.convert.text(data/text/friends.tsv, data/stores/friends, max_length=128)``)::

    cd benchmarks && ../.venv/bin/python bench_auto_vs_defaults.py --data ../data --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench_tune import workloads  # run from benchmarks/, as every bench script
from stoker.tune.trial import busy_step

AUTO = {"num_workers": "auto", "prefetch_factor": "auto"}


def epochs(make: Any, setting: dict[str, Any], n: int, step_ms: float) -> tuple[float, float]:
    """Rows/s from construction to the end of ``n`` epochs, and seconds to the first batch."""
    t0 = time.perf_counter()
    loader = make(setting)
    rows, first = 0, None
    for _ in range(n):
        for batch in loader:
            if first is None:
                first = time.perf_counter() - t0
            value = batch["input_ids"] if isinstance(batch, dict) and "input_ids" in batch else batch
            if isinstance(value, dict):
                value = next(iter(value.values()))
            if isinstance(value, (list, tuple)):
                value = value[0]
            rows += len(value)
            busy_step(step_ms)
    wall = time.perf_counter() - t0
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return rows / wall, first or 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../data"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    only = {w for w in args.only.split(",") if w}
    results = []
    print(f"{'workload':<9} {'defaults rows/s':>22} {'auto rows/s':>22} {'auto/defaults':>22}  first batch d / a")
    for name, _, _, _, _, make in workloads(args.data):
        if only and name not in only:
            continue
        runs: dict[str, list[tuple[float, float]]] = {"defaults": [], "auto": []}
        for r in range(args.rounds):
            order = ("defaults", "auto") if r % 2 == 0 else ("auto", "defaults")
            for arm in order:
                runs[arm].append(epochs(make, {} if arm == "defaults" else AUTO, args.epochs, args.step_ms))
        d = [rate for rate, _ in runs["defaults"]]
        a = [rate for rate, _ in runs["auto"]]
        ratios = [x / y for x, y in zip(a, d)]
        noise = min(a) <= max(d) and min(d) <= max(a)
        row = {
            "workload": name,
            "defaults_rows_per_s": d,
            "auto_rows_per_s": a,
            "ratios": ratios,
            "ratio": statistics.median(ratios),
            "within_noise": noise,
            "first_batch_s": {k: [f for _, f in v] for k, v in runs.items()},
            "load": os.getloadavg()[0],
        }
        results.append(row)

        def spread(xs: list[float], fmt: str) -> str:
            return f"{statistics.median(xs):{fmt}} ({min(xs):{fmt}}-{max(xs):{fmt}})"

        first_d = statistics.median(f for _, f in runs["defaults"])
        first_a = statistics.median(f for _, f in runs["auto"])
        print(
            f"{name:<9} {spread(d, ',.0f'):>22} {spread(a, ',.0f'):>22} {spread(ratios, '.2f'):>22}"
            f"{' within noise' if noise else ''}  {first_d:.2f} s / {first_a:.2f} s  (load {row['load']:.1f})",
            flush=True,
        )
    if args.out is not None:
        args.out.write_text(json.dumps({"rounds": args.rounds, "epochs": args.epochs, "results": results}, indent=1))


if __name__ == "__main__":
    main()
