"""``stoker tune STORE``: search the loader settings of a store with short trials (``stoker.tune``).

Each trial's line is printed (and flushed) as it ends; then the table of trials, the best setting
with the loader call to paste, and how close it is to the limits. Ctrl-C ends the search and
prints the best setting so far (exit code 130).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stoker.cli.output import console, fields, human_bytes, table

DESCRIPTION = (
    "Search the settings of the loader a store is trained with (the one 'stoker bench' picks: images, "
    "text or plain) for the fastest: workers, engine (threads or processes) and prefetch depth, by "
    "coordinate descent from the defaults, a few short trials instead of the whole grid. --step-ms N "
    "runs a simulated training step per batch: a pure-Python loop holding the GIL N ms. pin_memory is "
    "only searched for a CUDA --device. Tuning changes how fast batches come, never which rows or in "
    "what order. Running your own script per trial ('stoker tune STORE -- python train.py') is not "
    "supported yet: use --step-ms with your step's time (stoker doctor measures it)."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="search a store's loader settings for the fastest", description=DESCRIPTION)
    p.add_argument("store", help="path of the store directory")
    p.add_argument("--step-ms", type=float, default=0.0, help="simulated step per batch in ms, holding the GIL (0)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    p.add_argument("--trial-batches", type=int, default=30, help="batches timed per trial (default 30)")
    p.add_argument(
        "--trial-seconds", type=float, default=0.5, help="each trial goes on until this long has passed (0.5)"
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated settings to search (num_workers or workers, engine, prefetch_factor or prefetch, "
        "pin_memory; text: pad_to_multiple_of, bucket_window); default: workers, engine, prefetch",
    )
    p.add_argument("--grid", action="store_true", help="measure every setting instead (slow; for comparison)")
    p.add_argument("--device", default="cpu", help="where batches land (default cpu)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write every trial and the result as JSON")
    p.set_defaults(func=run)


def describe(setting: dict[str, Any]) -> str:
    """``num_workers=2 engine=threads ...``, or ``(defaults)`` for no keyword."""
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "(defaults)"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def run(args: argparse.Namespace) -> int:
    from stoker.tune import tune
    from stoker.tune.trial import Trial

    only = [n for n in args.only.split(",") if n.strip()] if args.only is not None else None
    count = 0

    def on_trial(trial: Trial) -> None:
        nonlocal count
        count += 1
        what = f"{_rate(trial.rate)} rows/s, waiting {trial.wait_share:.0%}" if trial.ok else f"FAILED {trial.error}"
        print(f"trial {count}: {describe(trial.setting)}: {what}", flush=True)

    result = tune(
        args.store,
        batch_size=args.batch_size,
        step_ms=args.step_ms,
        trial_batches=args.trial_batches,
        trial_seconds=args.trial_seconds,
        space=only,
        device=args.device,
        method="grid" if args.grid else "descent",
        on_trial=on_trial,
    )
    print()
    fields(
        [
            ("store", result.store),
            ("loader", f"{result.loader}  [{result.kind} store]"),
            ("trials", f"batch_size={result.batch_size}, step {result.step_ms:g} ms (GIL held), {result.method}"),
            ("searched", ", ".join(f"{k} {v}" for k, v in result.space.items())),
            *(("note", n) for n in result.notes),
        ]
    )
    best = result.best
    rows = []
    for i, t in enumerate(result.trials, 1):
        marks = [
            m
            for m, on in (
                ("best", best is not None and t.setting == best.setting),
                ("defaults", t.setting == result.defaults_setting),
            )
            if on
        ]
        mark = ", ".join(marks)
        wait = "-" if t.wait_share is None else f"{t.wait_share:.0%}"
        rows.append((i, describe(t.setting), _rate(t.rate), wait, t.error or mark))
    table(["#", "setting", "rows/s", "consumer waits", ""], rows, title="trials")
    if best is None:
        _write(args, result)
        if result.interrupted:
            print("stoker: interrupted before a trial ended; no setting to recommend", file=sys.stderr)
            return 130
        print("stoker: error: every trial failed (see the table); no setting to recommend", file=sys.stderr)
        return 1
    defaults = result.defaults
    rate = best.rate or 0.0  # the best trial did not fail: it has a rate
    pairs: list[tuple[str, Any]] = [
        ("best" + (" so far (interrupted)" if result.interrupted else ""), f"{describe(best.setting)}"),
        (
            "rate",
            f"{_rate(rate)} rows/s, {human_bytes(rate * best.batch_bytes / result.batch_size)}/s"
            f" (mean of its {sum(t.setting == best.setting for t in result.trials)} trials)",
        ),
    ]
    if defaults is not None and defaults.setting == best.setting:
        pairs.append(("vs defaults", "the defaults are the best setting found"))
    elif defaults is not None and defaults.rate:
        pairs.append(("vs defaults", f"{rate / defaults.rate:.2f}x ({_rate(defaults.rate)} rows/s)"))
    lim = result.limits
    if lim is not None:
        pairs.append(("limits", _limits_line(lim)))
        if result.share_of_limit is not None:
            pairs.append(("of the limit", f"{result.share_of_limit:.0%}"))
    fields(pairs)
    console().print(result.call)
    _write(args, result)
    if result.interrupted:
        print("stoker: interrupted; the best setting so far is above", file=sys.stderr)
        return 130
    return 0


def _limits_line(lim: Any) -> str:
    parts = [f"{lim.cores} cores x one worker {_rate(lim.one_worker)} = {_rate(lim.cores_bound)} rows/s"]
    parts.append(f"memcpy {_rate(lim.memcpy)} rows/s")
    if lim.step is not None:
        parts.append(f"the step alone {_rate(lim.step)} rows/s")
    return "; ".join(parts)


def _write(args: argparse.Namespace, result: Any) -> None:
    if args.json:
        result.write_json(args.json)
