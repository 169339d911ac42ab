"""``stoker tune STORE`` / ``stoker tune -- python train.py``: search loader settings with short trials.

Each trial's line is printed (and flushed) as it ends; then the table of trials, the best setting
with the loader call to paste, and how close it is to the limits. Ctrl-C ends the search and
prints the best setting so far (exit code 130). Everything after the first ``--`` is the script's
command, taken out before the options are parsed (so the script's own flags are never tune's).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stoker.cli.output import console, fields, human_bytes, table

DESCRIPTION = (
    "Search the settings of the loader a store is trained with (images, text or plain, "
    "from what wrote it) for the fastest: workers, engine (threads or processes) and prefetch depth, by "
    "coordinate descent from the defaults, a few short trials (each ends once its rate is stable) "
    "instead of the whole grid. --step-ms N runs a simulated training step per batch: a pure-Python "
    "loop holding the GIL N ms. pin_memory is only searched for a CUDA --device. Or give your training "
    "script instead of a store: 'stoker tune -- python train.py [args]' runs it once per trial under "
    "the doctor's instrumentation, puts the trial's setting into every stoker.Loader it builds (its "
    "own keywords for those settings replaced), times --trial-batches of its own steps and ends it; "
    "a script reading a torch DataLoader is refused. Tuning changes how fast batches come, never "
    "which rows or in what order."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="search a store's loader settings for the fastest", description=DESCRIPTION)
    p.add_argument("store", nargs="?", default=None, help="path of the store directory (or give -- COMMAND)")
    p.add_argument(
        "--step-ms",
        type=float,
        default=None,
        help="simulated step per batch in ms, holding the GIL (0; not with a script)",
    )
    p.add_argument("--batch-size", type=int, default=None, help="rows per batch (default 256; not with a script)")
    p.add_argument("--trial-batches", type=int, default=30, help="batches timed per trial (default 30)")
    p.add_argument(
        "--trial-seconds",
        type=float,
        default=None,
        help="a full trial's length; first trials end sooner once stable (0.5; 5 with a script)",
    )
    p.add_argument(
        "--stable",
        type=float,
        default=0.10,
        help="a first trial ends when its rate is known within this fraction (its 90%% confidence interval; "
        "0.10; 0: every trial full length)",
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, help="with a script: seconds one run of it may take in all (300)"
    )
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated settings to search (num_workers or workers, engine, prefetch_factor or prefetch, "
        "pin_memory; text: pad_to_multiple_of, bucket_window; images: reduced_decode, decode_device); "
        "default: workers, engine, prefetch",
    )
    p.add_argument("--grid", action="store_true", help="measure every setting instead (slow; for comparison)")
    p.add_argument("--device", default=None, help="where batches land (default cpu; not with a script)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write every trial and the result as JSON")
    p.set_defaults(func=run, script=[])
    _command_after_dashes(p)


def _command_after_dashes(p: argparse.ArgumentParser) -> None:
    """Everything after the first ``--`` becomes ``args.script``, before argparse sees the options."""
    parse = p.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        command = words[words.index("--") + 1 :] if "--" in words else []
        words = words[: words.index("--")] if "--" in words else words
        ns, extra = parse(words, namespace)
        ns.script = command
        return ns, extra

    p.parse_known_args = parse_known_args  # type: ignore[method-assign]


def describe(setting: dict[str, Any]) -> str:
    """``num_workers=2 engine=threads ...``, or ``(defaults)`` for no keyword."""
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "(defaults)"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def run(args: argparse.Namespace) -> int:
    from stoker.errors import ConfigError
    from stoker.tune import tune, tune_script
    from stoker.tune.trial import Trial

    only = [n for n in args.only.split(",") if n.strip()] if args.only is not None else None
    count = 0
    if args.store is not None and args.script:
        raise ConfigError(
            "give a store or a command after '--', not both: the script's loaders read their own data "
            "(stoker tune STORE, or stoker tune -- python train.py)",
            option="command",
        )
    if args.store is None and not args.script:
        raise ConfigError("give a store to tune, or the training command after '--'", option="store")
    if args.stable < 0:
        raise ConfigError(f"--stable must be >= 0, got {args.stable!r}", option="stable")
    stable = args.stable or None
    if args.script:
        given = [
            f
            for f, v in (("--step-ms", args.step_ms), ("--batch-size", args.batch_size), ("--device", args.device))
            if v is not None
        ]
        if args.grid:
            given.append("--grid")
        if given:
            raise ConfigError(
                f"{', '.join(given)} do not apply with a script: its own step, batch size and device are measured "
                "as they are; leave them out",
                option="command",
            )

    def on_trial(trial: Trial) -> None:
        nonlocal count
        count += 1
        what = f"{_rate(trial.rate)} rows/s, waiting {trial.wait_share:.0%}" if trial.ok else f"FAILED {trial.error}"
        print(f"trial {count}: {describe(trial.setting)}: {what}", flush=True)

    if args.script:
        result = tune_script(
            args.script,
            trial_batches=args.trial_batches,
            trial_seconds=5.0 if args.trial_seconds is None else args.trial_seconds,
            stable=stable,
            timeout=args.timeout,
            space=only,
            on_trial=on_trial,
        )
        where = [("command", " ".join(args.script)), ("loader", result.loader)]
        how = f"{result.trial_batches} of the script's own steps, {result.method}"
    else:
        result = tune(
            args.store,
            batch_size=256 if args.batch_size is None else args.batch_size,
            step_ms=0.0 if args.step_ms is None else args.step_ms,
            trial_batches=args.trial_batches,
            trial_seconds=0.5 if args.trial_seconds is None else args.trial_seconds,
            stable=stable,
            space=only,
            device=args.device or "cpu",
            method="grid" if args.grid else "descent",
            on_trial=on_trial,
        )
        where = [("store", result.store), ("loader", f"{result.loader}  [{result.kind} store]")]
        how = f"batch_size={result.batch_size}, step {result.step_ms:g} ms (GIL held), {result.method}"
    print()
    fields(
        [
            *where,
            ("trials", how),
            ("searched", ", ".join(f"{k} {v}" for k, v in result.space.items())),
            *(("note", n) for n in result.notes),
        ]
    )
    best = result.best
    rows = []
    for i, t in enumerate(result.trials, 1):
        is_best = best is not None and t.setting == best.setting
        mark = ", ".join(m for m, on in (("best", is_best), ("defaults", t.setting == result.defaults_setting)) if on)
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
            f"{_rate(rate)} rows/s, {human_bytes(rate * best.batch_bytes / max(1, result.batch_size))}/s"
            f" (mean of its {sum(t.setting == best.setting for t in result.trials)} trials)",
        ),
    ]
    if defaults is not None and defaults.setting == best.setting:
        pairs.append(("vs defaults", "the defaults are the best setting found"))
    elif result.versus_defaults is not None:
        pairs.append(("vs defaults", str(result.versus_defaults)))
    elif defaults is not None:  # interrupted before the comparison: the search's trials are no fair one
        pairs.append(("vs defaults", "not compared (the search ended before its interleaved rounds)"))
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
