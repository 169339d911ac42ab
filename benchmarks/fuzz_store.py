"""The store fuzzer at full length: damage a small store N times, print the outcome counts.

    python benchmarks/fuzz_store.py --mutations 100000 [--seed 0] [--json]

Each mutation (a flipped byte, a cut, an inserted byte, a manifest edit; see
``tests/faults/storefuzz.py``) is opened and read with ``verify=False`` and ``verify=True``.
The goals: 0 aborts, 0 hangs, 0 exceptions that are not StokerError, and with ``verify=True``
0 silently wrong values. Exit code 1 if any goal is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "faults"))

import storefuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutations", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args()
    t0 = time.perf_counter()
    report = storefuzz.run(args.mutations, args.seed)
    seconds = time.perf_counter() - t0
    if args.json:
        print(json.dumps({**report.as_json(), "seconds": round(seconds, 1)}, indent=1))
    else:
        print(f"{report.mutations:,} mutations, each read with verify=False and verify=True, in {seconds:.0f} s")
        for key, counts in sorted(report.counts.items()):
            print(f"  {key:30s} " + "  ".join(f"{k}={v:,}" for k, v in sorted(counts.items())))
    bugs = report.total("abort") + report.total("hang") + report.total("other_error")
    bugs += report.counts.get("verify=True,resigned=False", {}).get("wrong", 0)
    for line in report.details:
        print(line, file=sys.stderr)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
