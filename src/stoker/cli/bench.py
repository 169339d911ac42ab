"""``stoker bench STORE``: loader throughput for a few worker counts."""

from __future__ import annotations

import argparse
import time

from stoker.cli.output import human_bytes, progress, table
from stoker.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure loader throughput on a store", description=__doc__)
    p.add_argument("store", help="path of the store directory")
    p.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    p.add_argument("--workers", default="0,1,2", help="comma-separated worker counts to try (default 0,1,2)")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds to measure each setting (default 3)")
    p.add_argument("--no-shuffle", action="store_true", help="read in storage order instead of shuffled")
    p.add_argument("--columns", default=None, help="comma-separated columns to read (default all)")
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


def _batch_bytes(batch) -> int:
    return sum(getattr(v, "nbytes", 0) for v in batch.values())


def run(args: argparse.Namespace) -> int:
    from stoker.loader import Loader
    from stoker.store.reader import Store

    ds = Store(args.store)
    counts = _worker_counts(args.workers)
    columns = tuple(args.columns.split(",")) if args.columns else None
    rows = []
    for workers in counts:
        loader = Loader(
            ds, args.batch_size, shuffle=not args.no_shuffle, num_workers=workers, columns=columns, device=args.device
        )
        samples = nbytes = 0
        bar = progress(desc=f"workers={workers}", unit=" rows")
        t0 = time.perf_counter()
        first = None
        with bar:
            while time.perf_counter() - t0 < args.seconds:
                for batch in loader:
                    if first is None:
                        first = time.perf_counter() - t0
                    n = len(next(iter(batch.values())))
                    samples += n
                    nbytes += _batch_bytes(batch)
                    bar.update(n)
                    if time.perf_counter() - t0 >= args.seconds:
                        break
        dt = time.perf_counter() - t0
        first_ms = "-" if first is None else f"{first * 1000:.1f}"  # "-": the store gave no batch
        rows.append((workers, f"{samples / dt:,.0f}", f"{nbytes / dt / 1e6:,.0f}", first_ms))
    print(
        f"store {ds.path}: {len(ds):,} rows, {human_bytes(ds.nbytes)}; batch_size={args.batch_size}, "
        f"{'storage order' if args.no_shuffle else 'shuffled'}, device={args.device}"
    )
    table(["workers", "samples/s", "MB/s", "first batch ms"], rows)
    return 0
