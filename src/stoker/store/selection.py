"""Row selections: checked index arrays, and the sizes and rows of a split.

Shared by ``Store.select``/``Store.split`` and by ``stoker.Subset``: an index outside
``0..n-1`` is a :class:`~stoker.errors.ConfigError` naming the first bad one, never wrapped
around or clipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stoker.errors import ConfigError

FRACTION_TOLERANCE = 1e-6  # fractions must sum to 1 within this


def check_indices(indices: Any, n: int, option: str = "indices") -> np.ndarray:
    """``indices`` as a 1-D int64 array, every entry in ``0..n-1``; a ConfigError otherwise.

    A range, a list, a numpy array or a 1-D integer tensor are accepted; booleans (a mask) and
    floats are refused, as are negative indices (no wrap-around).
    """
    if isinstance(indices, range):
        idx = np.arange(indices.start, indices.stop, indices.step, dtype=np.int64)
    else:
        if hasattr(indices, "numpy") and callable(indices.numpy):  # a torch tensor
            indices = indices.numpy()
        idx = np.asarray(indices)
        if idx.size == 0:
            idx = idx.astype(np.int64)
    if idx.ndim != 1:
        raise ConfigError(f"{option} must be one index per row (1-D), got shape {idx.shape}", option=option)
    if idx.dtype.kind not in "iu":
        raise ConfigError(
            f"{option} must be integer row numbers in 0..{n - 1}, got dtype {idx.dtype}"
            + (" (a boolean mask: pass np.flatnonzero(mask))" if idx.dtype.kind == "b" else ""),
            option=option,
        )
    idx = idx.astype(np.int64, copy=False)
    bad = np.flatnonzero((idx < 0) | (idx >= n))
    if bad.size:
        raise ConfigError(
            f"{option}[{int(bad[0])}] = {int(idx[bad[0]])} is out of range: the data has {n} rows, "
            f"so indices must be in 0..{n - 1} (negative indices are not accepted)",
            option=option,
        )
    return idx


def split_sizes(n: int, parts: Sequence[float] | Sequence[int]) -> list[int]:
    """Rows per part: ``parts`` are row counts summing to ``n``, or fractions summing to 1.

    Fractions give ``floor(f * n)`` rows each; the rows left over go one by one to the parts with
    the largest remainders (the earlier part on a tie). A positive fraction that would get no row
    is refused rather than leaving its part empty.
    """
    if isinstance(parts, (str, bytes)) or not isinstance(parts, Sequence) or len(parts) == 0:
        raise ConfigError(
            f"split takes a non-empty list of fractions summing to 1 or of row counts summing to {n}, got {parts!r}",
            option="parts",
        )
    values = list(parts)
    if any(isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) for v in values):
        raise ConfigError(f"split parts must be numbers, got {parts!r}", option="parts")
    if all(isinstance(v, (int, np.integer)) for v in values):
        counts = [int(v) for v in values]
        if any(c < 0 for c in counts) or sum(counts) != n:
            raise ConfigError(
                f"split counts {counts} must be >= 0 and sum to the {n} rows (they sum to {sum(counts)}); "
                "or pass fractions summing to 1",
                option="parts",
            )
        return counts
    fractions = [float(v) for v in values]
    if any(not 0.0 <= f <= 1.0 for f in fractions) or not math.isclose(sum(fractions), 1.0, abs_tol=FRACTION_TOLERANCE):
        raise ConfigError(
            f"split fractions {fractions} must each be in [0, 1] and sum to 1 (they sum to {sum(fractions)}); "
            f"or pass integer row counts summing to {n}",
            option="parts",
        )
    exact = [f * n for f in fractions]
    counts = [math.floor(x) for x in exact]
    left = n - sum(counts)
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[:left]:
        counts[i] += 1
    empty = [i for i, (f, c) in enumerate(zip(fractions, counts)) if f > 0 and c == 0]
    if empty:
        raise ConfigError(
            f"split fractions {fractions} of {n} rows leave part {empty[0]} with no row "
            f"(sizes {counts}); pass larger fractions or row counts",
            option="parts",
        )
    return counts


def split_rows(n: int, parts: Sequence[float] | Sequence[int], seed: int = 0, shuffle: bool = True) -> list[np.ndarray]:
    """The rows of each part of ``0..n-1``, each part in increasing order.

    With ``shuffle`` the rows are dealt from ``np.random.default_rng(seed).permutation(n)``, so a
    seed gives the same parts on every machine and run; without it the parts are consecutive.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}", option="seed")
    sizes = split_sizes(n, parts)
    order = np.random.default_rng(int(seed)).permutation(n) if shuffle else np.arange(n, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.sort(order[a:b]).astype(np.int64) for a, b in zip(bounds[:-1], bounds[1:])]


__all__ = ["check_indices", "split_rows", "split_sizes"]
