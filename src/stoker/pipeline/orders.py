"""The global order of one epoch, computed lazily where the order allows it.

An :class:`EpochOrder` answers ``take(positions)``: the rows at those positions of the epoch's
order of all rows, identical on every rank and independent of the world size. It is a pure
function of ``(seed, epoch, num_rows, order, block_size, window)``.

* ``sequential``: rows 0..n-1; nothing is stored.
* ``global``: a permutation of all rows, built when the epoch starts (4 bytes a row below
  2**31 rows, else 8), the same permutation as ``numpy.random.default_rng([seed, epoch]).permutation(n)``.
* ``block``: blocks of ``block_size`` contiguous rows are permuted when the epoch starts (8 bytes a
  block); rows are expanded lazily, one window of ``window`` consecutive permuted blocks at a
  time, and shuffled inside that window with a generator seeded by ``(seed, epoch, 1, w)``.
  Memory is the block permutation plus the window in hand, whatever the number of rows.
"""

from __future__ import annotations

import numpy as np
from numpy.random import default_rng  # imported with the module, not at the first epoch start (0.06 s)

ORDERS = ("sequential", "global", "block")
BLOCK_SIZE = 4096  # rows per block of the block order by default
WINDOW = 16  # blocks per window by default


class EpochOrder:
    """The order of all ``num_rows`` rows in one epoch; ``take`` maps positions to rows."""

    def __init__(self, num_rows: int, order: str, seed: int, epoch: int, block_size: int, window: int) -> None:
        self.num_rows, self.order = num_rows, order
        self._seed, self._epoch, self._window = seed, epoch, window
        self._perm: np.ndarray | None = None
        self._cached: tuple[int, np.ndarray] | None = None  # the window in hand: (id, its rows)
        if order == "global":
            dtype = np.int32 if num_rows < 2**31 else np.int64
            perm = np.arange(num_rows, dtype=dtype)
            default_rng([seed, epoch]).shuffle(perm)  # same draws as .permutation(num_rows)
            self._perm = perm
        elif order == "block":
            self._block_size = block_size
            num_blocks = -(-num_rows // block_size)
            self._blocks = default_rng([seed, epoch]).permutation(num_blocks)
            lengths = np.full(num_blocks, block_size, dtype=np.int64)
            lengths[self._blocks == num_blocks - 1] = num_rows - (num_blocks - 1) * block_size  # the short last block
            # the first position of every window, and one past the last
            per_window = np.add.reduceat(lengths, np.arange(0, num_blocks, window))
            self._window_starts = np.concatenate([[0], np.cumsum(per_window)])

    def take(self, positions: np.ndarray) -> np.ndarray:
        """The rows (int64) at ``positions`` (each in ``[0, num_rows)``) of this epoch's order."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.order == "sequential":
            return positions.copy()
        if self._perm is not None:
            return self._perm[positions].astype(np.int64)
        starts = self._window_starts
        if self._cached is not None and len(positions):  # the usual case: every position in the window in hand
            w, rows = self._cached
            lo, hi = positions.min(), positions.max()
            if starts[w] <= lo and hi < starts[w + 1]:
                return rows[positions - starts[w]]
        out = np.empty(len(positions), dtype=np.int64)
        windows = np.searchsorted(starts, positions, side="right") - 1
        for w in np.unique(windows):
            mask = windows == w
            out[mask] = self._window_rows(int(w))[positions[mask] - starts[w]]
        return out

    def rows(self, begin: int, end: int) -> np.ndarray:
        """The rows (int64) at positions ``begin..end-1`` (``0 <= begin <= end <= num_rows``)."""
        if self.order == "sequential":
            return np.arange(begin, end, dtype=np.int64)
        if self._perm is not None:
            return self._perm[begin:end].astype(np.int64)
        return self.take(np.arange(begin, end, dtype=np.int64))

    def _window_rows(self, w: int) -> np.ndarray:
        if self._cached is not None and self._cached[0] == w:
            return self._cached[1]
        size = self._block_size
        starts = self._blocks[w * self._window : (w + 1) * self._window] * size
        lengths = np.minimum(size, self.num_rows - starts)
        ends = np.cumsum(lengths)
        rows = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]), dtype=np.int64)
        default_rng([self._seed, self._epoch, 1, w]).shuffle(rows)
        self._cached = (w, rows)
        return rows
