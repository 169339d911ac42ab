"""A CPU hog: N busy processes (default: one per core) until killed, a pure-Python stand-in for ``stress --cpu N``.

    python scripts/hog.py            # as many busy processes as cores, until Ctrl-C or SIGTERM
    python scripts/hog.py -n 2 -t 600

Used by ``scripts/load_test.sh`` to check that the test suite holds on a loaded machine. Each
process spins on integer arithmetic (no I/O, no memory traffic to speak of), so it takes what
the scheduler gives it and nothing else. SIGTERM or SIGINT to the parent stops every child.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import time


def _spin() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--procs", type=int, default=os.cpu_count() or 2, help="busy processes (default: cores)")
    parser.add_argument("-t", "--seconds", type=float, default=0.0, help="stop after this long (default: never)")
    args = parser.parse_args(argv)
    if args.procs < 1:
        parser.error("--procs must be at least 1")

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_spin, name=f"hog-{i}", daemon=True) for i in range(args.procs)]
    stop = {"now": False}

    def _stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    for p in procs:
        p.start()
    print(f"hog: {args.procs} busy processes: {' '.join(str(p.pid) for p in procs)}", file=sys.stderr, flush=True)
    end = time.monotonic() + args.seconds if args.seconds > 0 else float("inf")
    try:
        while not stop["now"] and time.monotonic() < end and all(p.is_alive() for p in procs):
            time.sleep(0.2)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
