"""Recycled host buffers that are never overwritten while someone still holds them.

Batch buffers are recycled (a fresh buffer each step costs page faults and zeroing), but only
when nobody else holds them: the pool keeps a reference to every buffer, and a buffer is free
again when that is the only reference left (the torch tensors handed to the user keep the numpy
array alive, as do views and ``.numpy()`` of them). A batch the user kept is never reused.

Pinned buffers (for CUDA copies) are allocated through torch; everything else is numpy.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

# references to a free buffer: the pool's list + getrefcount's own argument
_FREE_REFS = 2


class BufferPool:
    """Per-(key, shape, dtype) free lists of host buffers.

    Args:
        allocate: ``(shape, dtype) -> ndarray``; plain ``np.empty`` by default, a pinned
            allocator for CUDA transfers.
        max_per_key: buffers kept per key; beyond that a fresh one is allocated and not kept
            (bounds memory when the user holds on to many batches).
    """

    def __init__(
        self, allocate: Callable[[tuple[int, ...], np.dtype], np.ndarray] | None = None, max_per_key: int = 16
    ) -> None:
        self._allocate = allocate or (lambda shape, dtype: np.empty(shape, dtype))
        self._max = max_per_key
        self._free: dict[tuple, list[np.ndarray]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, shape: tuple[int, ...], dtype: npt.DTypeLike) -> np.ndarray:
        """A buffer of ``shape``/``dtype`` that nobody else references."""
        slot = (key, tuple(shape), np.dtype(dtype).str)
        with self._lock:
            buffers = self._free.setdefault(slot, [])
            for i in range(len(buffers)):
                # no loop variable: it would hold one more reference
                if sys.getrefcount(buffers[i]) == _FREE_REFS:
                    return buffers[i]  # the caller's reference now marks it busy
            buf = self._allocate(tuple(shape), np.dtype(dtype))
            if len(buffers) < self._max:
                buffers.append(buf)
            return buf

    def clear(self) -> None:
        with self._lock:
            self._free.clear()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(b.nbytes for bufs in self._free.values() for b in bufs)
