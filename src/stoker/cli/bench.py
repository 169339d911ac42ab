"""``stoker bench STORE``: loader throughput for a few worker counts.

The loader is the one the store's data is trained with (see ``bench_loaders.py``): images are
decoded and cropped, text is padded, other stores are read as they are. MB/s counts every byte
of the batches handed out: tensors, and the bytes and strings of binary and string columns.
"""

from __future__ import annotations

import argparse
import time

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
    p.add_argument("--seconds", type=float, default=3.0, help="seconds to measure each setting (default 3)")
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
    from stoker.store.reader import Store

    ds = Store(args.store)
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
    rows = []
    for workers in counts:
        loader = plan.make(workers)
        samples = nbytes = 0
        bar = progress(desc=f"workers={workers}", unit=" rows")
        t0 = time.perf_counter()
        first = None
        with bar:
            while time.perf_counter() - t0 < args.seconds:
                for batch in loader:
                    if first is None:
                        first = time.perf_counter() - t0
                    n = rows_of(batch)
                    samples += n
                    nbytes += batch_bytes(batch)
                    bar.update(n)
                    if time.perf_counter() - t0 >= args.seconds:
                        break
                if first is None:  # an epoch without a batch: nothing to time
                    break
        dt = time.perf_counter() - t0
        first_ms = "-" if first is None else f"{first * 1000:.1f}"  # "-": the store gave no batch
        rows.append((workers, f"{samples / dt:,.0f}", f"{nbytes / dt / 1e6:,.1f}", first_ms))
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
    table(["workers", "samples/s", "MB/s", "first batch ms"], rows)
    return 0
