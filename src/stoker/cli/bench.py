"""``stoker bench STORE``: loader throughput for a few worker counts, like with like.

The loader is the one the store's data is trained with (see ``bench_loaders.py``): images are
decoded and cropped, text is padded, other stores are read as they are. MB/s counts every byte
of the batches handed out: tensors, and the bytes and strings of binary and string columns.

The worker counts are measured in ``--rounds`` interleaved rounds (the order reversed every other
round) after an untimed warm-up read, so no count alone pays a cold page cache; each row is the
median of its rounds with their range, and counts whose range overlaps the fastest one's are said
to be within noise of it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from stoker.cli.bench_loaders import MODES, bench_loaders
from stoker.cli.output import fields, human_bytes, progress, table
from stoker.errors import ConfigError
from stoker.tune.trial import nbytes as batch_bytes
from stoker.tune.trial import rows_of

DESCRIPTION = (
    "Measure loader throughput on a store for a few worker counts. The loader is the one its data "
    "is trained with: a store written by 'stoker convert images' is decoded and cropped by "
    "stoker.vision.ImageSource (RandomResizedCrop + RandomHorizontalFlip), one written by "
    "'stoker convert text' is padded by stoker.text.Loader, any other is read by stoker.Loader "
    "(--mode chooses instead). MB/s counts every byte of the batches handed out, binary and string "
    "columns included."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure loader throughput on a store", description=DESCRIPTION)
    p.add_argument("store", help="path of the store directory, or its object-store URL (s3://, gs://, ...)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    p.add_argument("--workers", default="0,1,2", help="comma-separated worker counts to try (default 0,1,2)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds to measure each count per round (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every count (default 3): medians")
    p.add_argument("--no-shuffle", action="store_true", help="read in storage order instead of shuffled")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="auto",
        help="the loader: images (decode + training crop), text (padded token ids), plain (stoker.Loader); "
        "default auto: from what wrote the store",
    )
    p.add_argument(
        "--size",
        type=int,
        default=None,
        help="images: side of the training crop in pixels (default: a resized store's size, else 224)",
    )
    p.add_argument("--columns", default=None, help="plain: comma-separated columns to read (default all)")
    p.add_argument("--device", default="cpu", help="where batches land (default cpu)")
    p.set_defaults(func=run)


def _worker_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or any(c < 0 for c in counts):
        raise ConfigError(f"--workers takes comma-separated counts >= 0 like 0,1,2, not {text!r}", option="workers")
    return counts


def run(args: argparse.Namespace) -> int:
    from stoker.stores import open as open_store

    ds = open_store(args.store)
    counts = _worker_counts(args.workers)
    if not args.seconds > 0:  # also NaN
        raise ConfigError(f"--seconds must be a time > 0, got {args.seconds}", option="seconds")
    columns = tuple(args.columns.split(",")) if args.columns else None
    plan = bench_loaders(
        ds,
        args.mode,
        args.batch_size,
        shuffle=not args.no_shuffle,
        columns=columns,
        device=args.device,
        size=args.size,
    )
    if args.rounds < 1:
        raise ConfigError(f"--rounds must be >= 1, got {args.rounds}", option="rounds")
    _read(plan.make(counts[0]), min(args.seconds, 1.0), None)  # warm-up, untimed: the page cache, imports
    runs: dict[int, list[tuple[float, float, float | None]]] = {w: [] for w in counts}
    with progress(desc="bench", unit=" rows") as bar:
        for r in range(args.rounds):
            for workers in counts if r % 2 == 0 else counts[::-1]:
                runs[workers].append(_read(plan.make(workers), args.seconds, bar))
    rows, ranges = [], {}
    for workers in counts:
        rates = [x[0] for x in runs[workers]]
        firsts = [x[2] for x in runs[workers] if x[2] is not None]
        ranges[workers] = (min(rates), max(rates))
        first_ms = f"{statistics.median(firsts) * 1000:.1f}" if firsts else "-"  # "-": the store gave no batch
        rows.append(
            [
                workers,
                f"{statistics.median(rates):,.0f}",
                f"{statistics.median(x[1] for x in runs[workers]) / 1e6:,.1f}",
                first_ms,
                f"{min(rates):,.0f}-{max(rates):,.0f}",
            ]
        )
    fields(
        [
            ("store", f"{ds.path}: {len(ds):,} rows, {human_bytes(ds.nbytes)}"),
            (
                "loader",
                f"{plan.describe}  [{f'a {plan.mode} store' if args.mode == 'auto' else f'--mode {plan.mode}'}]",
            ),
            (
                "batches",
                f"batch_size={args.batch_size}, {'storage order' if args.no_shuffle else 'shuffled'}, "
                f"device={args.device}",
            ),
        ]
    )
    table(["workers", "samples/s", "MB/s", "first batch ms", "samples/s range"], rows)
    fastest = max(counts, key=lambda w: statistics.median(x[0] for x in runs[w]))
    near = [w for w in counts if w != fastest and ranges[w][1] >= ranges[fastest][0]]
    verdict = f"fastest: workers={fastest} (median of {args.rounds} interleaved rounds)"
    if near:
        verdict += "; within noise of it: " + ", ".join(f"workers={w}" for w in near)
    print(verdict)
    return 0


def _read(loader: Any, seconds: float, bar: Any) -> tuple[float, float, float | None]:
    """Rows/s, bytes/s and the seconds to the first batch of ``loader`` read for ``seconds``."""
    samples = nbytes = 0
    t0 = time.perf_counter()
    first = None
    while time.perf_counter() - t0 < seconds:
        for batch in loader:
            if first is None:
                first = time.perf_counter() - t0
            n = rows_of(batch)
            samples += n
            nbytes += batch_bytes(batch)
            if bar is not None:
                bar.update(n)
            if time.perf_counter() - t0 >= seconds:
                break
        if first is None:  # an epoch without a batch: nothing to time
            break
    dt = time.perf_counter() - t0
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return samples / dt, nbytes / dt, first
