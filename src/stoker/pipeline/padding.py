"""Padding rows of varying length into batches: one layout for a whole chunk of batches.

Rows arrive flat (values plus offsets, as a :class:`~stoker.store.columns.Ragged` holds them)
and leave as one ``(rows_k, width_k)`` array per batch, each batch padded to its own longest
row rounded up to ``multiple_of``. :class:`PadGrid` computes once where every value of every
batch goes; filling a column (ids, type ids, the attention mask) is then one scatter into one
flat buffer, and each batch is a view of it. The store loader (``pad_groups``) and
``stoker.text`` (``PaddedText``) both pad through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.store.columns import Ragged


@dataclass(frozen=True)
class PadGrid:
    """Where a chunk's values go when its batches are padded.

    Batch ``k`` holds rows ``bounds[k]:bounds[k+1]`` of the chunk and becomes a
    ``(rows_k, widths[k])`` array: its longest row rounded up to ``multiple_of``. All batches
    share one flat buffer; batch ``k`` is ``flat[starts[k]:starts[k+1]]``, and value ``j`` of the
    chunk (flat, row after row) goes to ``flat[positions[j]]``.
    """

    bounds: np.ndarray
    widths: np.ndarray
    starts: np.ndarray
    positions: np.ndarray

    @classmethod
    def of(cls, offsets: np.ndarray, sizes: np.ndarray, multiple_of: int = 1) -> PadGrid:
        """The grid of rows with ``offsets`` (starting at 0), cut into batches of ``sizes`` rows."""
        lengths = np.diff(offsets)
        bounds = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        full = sizes > 0
        longest = np.zeros(len(sizes), dtype=np.int64)
        if full.any():
            longest[full] = np.maximum.reduceat(lengths, bounds[:-1][full])
        widths = -(-longest // multiple_of) * multiple_of
        starts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes * widths, out=starts[1:])
        # row r of batch k starts at starts[k] + (r - bounds[k]) * widths[k]
        row_width = np.repeat(widths, sizes)
        row_start = np.repeat(starts[:-1] - bounds[:-1] * widths, sizes) + np.arange(len(lengths)) * row_width
        positions = np.repeat(row_start - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        return cls(bounds, widths, starts, positions)

    def fill(self, values: np.ndarray, pad_value: int | float, dtype: Any = None) -> np.ndarray:
        """The flat padded buffer of ``values`` (one per position), in ``dtype`` (default: theirs,
        widened only when ``pad_value`` does not fit it)."""
        narrow = values.dtype
        if narrow.kind in "iu" and not np.iinfo(narrow).min <= pad_value <= np.iinfo(narrow).max:
            narrow = np.result_type(narrow, np.min_scalar_type(pad_value))
        flat = np.full(int(self.starts[-1]), pad_value, dtype=narrow)
        flat[self.positions] = values  # scatter in the values' own dtype, then widen the whole buffer once
        return flat if dtype is None or flat.dtype == dtype else flat.astype(dtype)

    def mask(self, dtype: Any) -> np.ndarray:
        """The flat attention mask: 1 where a value is, 0 on padding."""
        flat = np.zeros(int(self.starts[-1]), dtype=dtype)
        flat[self.positions] = 1
        return flat

    def views(self, flat: np.ndarray) -> list[np.ndarray]:
        """Batch ``k`` of a filled buffer as a ``(rows_k, widths[k])`` view, for every batch."""
        starts, widths, bounds = self.starts.tolist(), self.widths.tolist(), self.bounds.tolist()
        return [
            flat[a:z].reshape(n1 - n0, w) for a, z, n0, n1, w in zip(starts, starts[1:], bounds, bounds[1:], widths)
        ]


def pad_groups(rows: Ragged, bounds: np.ndarray, pad_value: int | float = 0, multiple_of: int = 1) -> list[np.ndarray]:
    """Pad each group of rows ``bounds[k]:bounds[k+1]`` to its own longest length, in one pass.

    All groups share one flat buffer in the rows' dtype; group ``k`` is a ``(rows_k, width_k)`` view of it.
    """
    grid = PadGrid.of(rows.offsets, np.diff(bounds), multiple_of)
    return grid.views(grid.fill(rows.values, pad_value))


__all__ = ["PadGrid", "pad_groups"]
