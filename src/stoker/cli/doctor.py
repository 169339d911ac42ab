"""``stoker doctor [options] -- COMMAND ...``: run a training script, say where its step time goes.

The script runs unchanged in a child process. Every batch fetch of torch DataLoaders and stoker
Loaders is timed against the compute between fetches, stoker pipeline stages are timed, and CPU,
memory, disk and GPU are sampled. The verdict and ranked recommendations are printed; report.json,
report.html and trace.json (Chrome / Perfetto) go to --out. The exit code is the script's.
With --json, stdout holds the report's JSON alone: the script's own stdout goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from stoker.cli.main import EXIT_USAGE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="run a training script and find its data stalls",
        description=__doc__,
        usage="stoker doctor [options] -- COMMAND [ARGS ...]",
    )
    p.add_argument(
        "--out",
        default="stoker-doctor",
        help="directory for report.json, report.html, trace.json (default stoker-doctor/)",
    )
    p.add_argument("--interval", type=float, default=0.5, help="seconds between resource samples (default 0.5)")
    p.add_argument(
        "--stall-threshold",
        type=float,
        default=0.2,
        help="data-wait share from which the run is input-bound (default 0.2)",
    )
    p.add_argument("--no-html", action="store_true", help="skip the HTML report (and matplotlib)")
    p.add_argument("--no-trace", action="store_true", help="skip the Chrome-trace JSON")
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="never call a Dataset's __getitem__ outside the script's own fetches (the check for random augmentation)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON instead of the tables; stdout is the JSON alone (the script's stdout goes to stderr)",
    )
    # dest "script", not "command": that is the name of the subcommand chosen (cli/main.py, cli/flags.py)
    p.add_argument("script", nargs=argparse.REMAINDER, metavar="COMMAND", help="the command to run, after '--'")
    p.set_defaults(func=run)


def _check_extra() -> None:
    """The doctor's libraries come with the 'doctor' extra; say so instead of failing later."""
    import importlib.util

    missing = [m for m in ("psutil", "rich", "matplotlib") if importlib.util.find_spec(m) is None]
    if missing:
        from stoker.errors import ConfigError

        raise ConfigError(f"stoker doctor needs {', '.join(missing)}: pip install 'stoker[doctor]'", option="doctor")


def run(args: argparse.Namespace) -> int:
    _check_extra()
    import json

    from stoker.doctor.config import DoctorConfig
    from stoker.doctor.outputs import write_outputs
    from stoker.doctor.run import run_command
    from stoker.doctor.terminal import render

    command = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not command:
        print(
            "stoker doctor: give the command to run after '--', e.g. stoker doctor -- python train.py", file=sys.stderr
        )
        return EXIT_USAGE
    cfg = DoctorConfig(
        interval=args.interval,
        stall_threshold=args.stall_threshold,
        out=args.out,
        html=not args.no_html,
        trace=not args.no_trace,
        probe=not args.no_probe,
    )
    sys.stdout.flush()
    report = run_command(command, cfg, stdout=sys.stderr if args.json else None)
    write_outputs(report, cfg)
    if args.json:
        print(json.dumps(report.to_json(), indent=1, default=str))
    else:
        render(report)
    return report.exit_code or 0
