"""What starting a pass costs, and what a setting delivers over whole epochs, starts included.

Part A, pass starts: a 64-row store read in one batch per pass, so each pass is almost all start
and end. Microseconds per pass (median over rounds) for:
  inline          num_workers=0
  threads         num_workers=2, engine="threads"
  threads kept    the same with persistent_workers=True (the threads serve every pass)
  tuned threads   num_workers=2, prefetch_factor="auto", engine="threads" (the online tuner's knobs)
  tuned kept      the same with persistent_workers=True (kept threads the tuner resizes)
  processes       num_workers=2, engine="processes"
  processes kept  the same with persistent_workers=True
Part B, whole epochs: on-the-fly text (``stoker.text.Loader`` over lines of
``data/text/friends.txt``, BERT WordPiece ``data/text/vocab.txt``, max_length 128, batch 64,
bucketing), its token cache filled by a first epoch, then whole epochs read back to back with
nothing else in the loop; rows/s for the default (inline) and for one worker thread at prefetch
8 (the setting tune trials once rated 1.39x the default, when they left each later pass's start
out), on 8,000 lines (bench_tune's ``fly``, 125 batches an epoch) and on 400,000 lines.
Every loader is built outside the timings; rounds interleave the configurations.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_pass_starts.py [--data data] [--rounds 5]
        [--starts-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import stoker
import stoker.text

STARTS = {
    "inline": {"num_workers": 0},
    "threads": {"num_workers": 2, "engine": "threads"},
    "threads kept": {"num_workers": 2, "engine": "threads", "persistent_workers": True},
    "tuned threads": {"num_workers": 2, "prefetch_factor": "auto", "engine": "threads"},
    "tuned kept": {"num_workers": 2, "prefetch_factor": "auto", "engine": "threads", "persistent_workers": True},
    "processes": {"num_workers": 2, "engine": "processes"},
    "processes kept": {"num_workers": 2, "engine": "processes", "persistent_workers": True},
}
PASSES = {
    "inline": 2000,
    "threads": 2000,
    "threads kept": 2000,
    "tuned threads": 2000,
    "tuned kept": 2000,
    "processes": 40,
    "processes kept": 2000,
}
TEXT = {"default": {}, "1 thread, prefetch 8": {"num_workers": 1, "prefetch_factor": 8}}
TEXT_LINES = (8_000, 400_000)
TEXT_SECONDS = 1.0  # whole epochs are read until this much time has passed, per round


def per_pass_us(loader: Any, passes: int) -> float:
    t0 = time.perf_counter()
    for _ in range(passes):
        for _batch in loader:
            pass
    return (time.perf_counter() - t0) / passes * 1e6


def whole_epochs_rate(loader: Any) -> float:
    t0, rows = time.perf_counter(), 0
    while time.perf_counter() - t0 < TEXT_SECONDS:
        for batch in loader:
            rows += len(batch["input_ids"])
    return rows / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--starts-only", action="store_true", help="part A only")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")

    with tempfile.TemporaryDirectory(prefix="pass-starts-") as tmp:
        store = stoker.write(Path(tmp) / "s", {"x": np.zeros((64, 4), np.float32), "label": np.arange(64)})
        loaders = {name: stoker.Loader(store, batch_size=64, shuffle=True, **kw) for name, kw in STARTS.items()}
        for loader in loaders.values():
            per_pass_us(loader, 2)  # warm-up (a kept pool starts here)
        starts: dict[str, list[float]] = {name: [] for name in STARTS}
        for r in range(args.rounds):
            for name in list(STARTS)[r % len(STARTS) :] + list(STARTS)[: r % len(STARTS)]:
                starts[name].append(per_pass_us(loaders[name], PASSES[name]))
        for loader in loaders.values():
            loader.close()
    print("\nA. a pass of one 64-row batch (us per pass, median; rounds)")
    for name, values in starts.items():
        print(f"  {name:<16} {statistics.median(values):>9,.0f}   {', '.join(f'{v:,.0f}' for v in values)}")
    if args.starts_only:
        return

    all_lines = (Path(args.data) / "text" / "friends.txt").read_text(encoding="utf-8").splitlines()
    vocab = str(Path(args.data) / "text" / "vocab.txt")
    print(f"\nB. on-the-fly text, whole epochs back to back (rows/s, median of {args.rounds} rounds)")
    for count in TEXT_LINES:
        lines = (all_lines * (count // len(all_lines) + 1))[:count]
        text = {
            name: stoker.text.Loader(lines, tokenizer=vocab, batch_size=64, max_length=128, shuffle=True, seed=0, **kw)
            for name, kw in TEXT.items()
        }
        for loader in text.values():
            for _batch in loader:  # the token cache fills in the first epoch
                pass
        rates: dict[str, list[float]] = {name: [] for name in TEXT}
        for r in range(args.rounds):
            for name in TEXT if r % 2 == 0 else reversed(list(TEXT)):
                rates[name].append(whole_epochs_rate(text[name]))
        base = statistics.median(rates["default"])
        for name, values in rates.items():
            median = statistics.median(values)
            print(f"  {count:>7,} lines  {name:<22} {median:>12,.0f}  {median / base:.2f}x the default")
        for loader in text.values():
            loader.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
