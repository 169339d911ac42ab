"""Arrays already in memory (or memory-mapped) as a batch source: one gather per column per chunk.

``ArrayColumns`` is what a torch ``TensorDataset`` becomes inside the Loader (and what
``stoker.sources.Arrays`` builds on): instead of one ``__getitem__`` per sample in worker
processes and a collate, a chunk of batches is one ``np.take`` per column into the loader's
recycled buffers (pinned on CUDA), cut into views. Rows inside a batch come in the order of its
indices (the sampler's), as from a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from stoker.pipeline.source import BatchSource


def gather_plan(chunk: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted unique rows of a chunk of batches, where each batch row lies in them, and batch bounds.

    ``unique[where]`` are the chunk's rows in the batches' own order (the sampler's): a source that
    reads ``unique`` in one increasing selection hands out ``unique[where]``, cut at ``bounds``.
    """
    batches = [np.asarray(b, dtype=np.int64) for b in chunk]
    flat = np.concatenate(batches) if batches else np.empty(0, np.int64)
    unique, where = np.unique(flat, return_inverse=True)
    bounds = np.zeros(len(chunk) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in batches], out=bounds[1:])
    return unique, where.reshape(-1), bounds


def check_rows(unique: np.ndarray, n: int, where: str) -> None:
    """An IndexError naming a row of ``unique`` (in any order) outside ``0..n-1``."""
    if unique.size and (unique.min() < 0 or unique.max() >= n):
        bad = unique[(unique < 0) | (unique >= n)][0]
        raise IndexError(f"row {bad} is out of range for {where} of {n} rows")


class ArrayColumns(BatchSource):
    """A BatchSource over equal-length numeric arrays.

    Args:
        columns: name -> array (numpy, or anything ``np.take`` reads: a memmap); every array has
            one row per entry along its first axis.
        positional: batches are tuples in column order (``for x, y in loader``, like a
            TensorDataset in a DataLoader) instead of dicts.
    """

    def __init__(self, columns: Mapping[str, np.ndarray], positional: bool = False) -> None:
        self.columns = dict(columns)
        self.positional = positional
        self._len = len(next(iter(self.columns.values()))) if self.columns else 0
        self._pool: Any = None

    def use_buffers(self, pool: Any) -> None:
        """Gather into the loader's recycled buffers (pinned when it feeds a GPU)."""
        self._pool = pool

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}: {v.dtype}{list(v.shape[1:])}" for k, v in self.columns.items())
        return f"{type(self).__name__}(rows={self._len}, columns={{{cols}}})"

    @property
    def row_bytes(self) -> int:
        return sum(int(v.strides[0]) if v.ndim else v.itemsize for v in self.columns.values())

    def batch_bytes(self, batch_size: int) -> float:
        return float(batch_size * self.row_bytes)

    def read(self, chunk: list[np.ndarray]) -> list[Any]:
        unique, where, bounds = gather_plan(chunk)
        check_rows(unique, self._len, repr(self))
        rows = unique[where]
        shapes = {k: (len(rows), *v.shape[1:]) for k, v in self.columns.items()}
        if self._pool is None:
            taken = {k: np.empty(shapes[k], v.dtype) for k, v in self.columns.items()}
        else:
            taken = {k: self._pool.get(k, shapes[k], v.dtype) for k, v in self.columns.items()}
        for k, v in self.columns.items():
            # rows were checked above, so mode="clip" changes nothing (mode="raise" would buffer the output)
            np.take(v, rows, axis=0, mode="clip", out=taken[k])
        batches = [{k: v[bounds[b] : bounds[b + 1]] for k, v in taken.items()} for b in range(len(chunk))]
        if self.positional:
            return [tuple(b.values()) for b in batches]
        return batches


__all__ = ["ArrayColumns", "check_rows", "gather_plan"]
