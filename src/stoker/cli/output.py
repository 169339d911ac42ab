"""Printing helpers shared by the commands."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], file=None) -> None:
    """A plain aligned table (numbers right-aligned)."""
    out = file or sys.stdout
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def fmt(cells: Sequence[str]) -> str:
        parts = []
        for cell, w in zip(cells, widths):
            numeric = cell.replace(",", "").replace(".", "").replace("x", "").strip().isdigit()
            parts.append(cell.rjust(w) if numeric else cell.ljust(w))
        return "  ".join(parts).rstrip()

    print(fmt(headers), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in rows:
        print(fmt(r), file=out)


def progress(total: int | None = None, desc: str = "", unit: str = "it", disable: bool | None = None):
    """A tqdm progress bar on stderr, off when stderr is not a terminal unless asked."""
    from tqdm.auto import tqdm

    if disable is None:
        disable = not sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit=unit, disable=disable, file=sys.stderr, dynamic_ncols=True)
