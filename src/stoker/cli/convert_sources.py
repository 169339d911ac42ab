"""Shared parts of the ``stoker convert hdf5|arrays|table|dataset`` commands."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from stoker.cli.output import human_bytes


def common_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard-size", default="256MB", help="bytes of data per shard (default 256MB)")
    p.add_argument("--overwrite", action="store_true", help="replace STORE if it exists")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar on stderr (default: when it is a terminal)")


def writers_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--writers", type=int, default=None, metavar="N", help="shards written at once (default: one per core, at most 4)")


def split_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def summary(store: Path, seconds: float, source_bytes: int | None = None) -> None:
    """One line on stdout describing the written store."""
    from stoker.store.reader import Store

    ds = Store(store)
    rate = f", {source_bytes / seconds / 1e6:,.0f} MB/s of input" if source_bytes and seconds > 0 else ""
    skipped = ds.metadata.get("skipped")
    skip = f"; skipped {skipped} failing samples (indices {ds.metadata.get('skipped_indices', [])[:10]}...)" if skipped else ""
    print(f"wrote {store}: {len(ds):,} rows, {ds.num_shards} shards, {human_bytes(ds.nbytes)} in {seconds:.1f} s{rate}{skip}")
    print(f"  {ds}")


def timed(fn, *args, **kwargs) -> tuple[Path, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return Path(out), time.perf_counter() - t0


def warn(message: str) -> None:
    print(f"stoker: {message}", file=sys.stderr)
