"""One benchmark, two versions of stoker, side by side: is a change slower anywhere beyond noise?

    git worktree add /tmp/stoker-old <old commit>
    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_before_after.py \\
        --old /tmp/stoker-old/src --new src --rounds 3 -- benchmarks/bench_loader.py --seconds 2

Runs the benchmark script (one that writes its rows with ``--json``, as ``bench_loader.py`` does
through ``common.save``, or the peers harness ``peers/run.py --only stoker``) once per version per round, the versions taking turns (their order
reversed every other round), each run with that version's ``src`` first on ``PYTHONPATH``. Prints,
per result row, the new rate over the old one: the median of the per-round ratios and their range,
and "within noise" where the two versions' ranges of rates overlap.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(script: list[str], src: str, out: Path) -> dict[str, float]:
    """Samples/s of every result row of one run of ``script`` with ``src`` first on the path. The peers
    harness (``peers/run.py``) writes ``--out <stem>`` (its ``rows``); the others ``--json <file>`` (``results``)."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    peers = script[0].endswith("peers/run.py")
    where = ["--out", str(out.with_suffix(""))] if peers else ["--json", str(out)]
    subprocess.run([sys.executable, *script, *where], env=env, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads(out.with_suffix(".json").read_text())["rows" if peers else "results"]
    return {f"{r['workload']} | {r['contender']}": float(r["samples_per_s"]) for r in rows if "samples_per_s" in r}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the old version's src directory")
    ap.add_argument("--new", required=True, help="the new version's src directory")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("script", nargs=argparse.REMAINDER, help="-- the benchmark script and its arguments")
    args = ap.parse_args()
    script = [a for a in args.script if a != "--"]
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for which in order:
                runs[which].append(run(script, getattr(args, which), Path(tmp) / f"{which}-{r}.json"))
                print(f"round {r + 1}: {which} done", file=sys.stderr, flush=True)
    print(f"{'row':70} {'new/old':>8} {'range':>12}  old rates -> new rates")
    for row in runs["new"][0]:
        old = [x[row] for x in runs["old"] if row in x]
        new = [x[row] for x in runs["new"] if row in x]
        ratios = [n / o for n, o in zip(new, old) if o]
        if not ratios:
            continue
        noise = " within noise" if min(new) <= max(old) and min(old) <= max(new) else ""
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        rates = f"{statistics.median(old):,.0f} -> {statistics.median(new):,.0f}"
        print(f"{row[:70]:70} {statistics.median(ratios):>7.2f}x {spread:>12}  {rates}{noise}")


if __name__ == "__main__":
    main()
