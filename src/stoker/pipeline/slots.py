"""Shared-memory batch slots: worker processes write batches into them, the consumer hands them
out as tensors with no copy.

A slot is a file in ``/dev/shm`` (``stoker_<token>_s<k>``, the token starting with the
consumer's pid), sized for one task's arrays, mapped once by the consumer and once by each
worker that writes into it. The life of a slot::

    consumer  SlotRing.take()       a free slot, or a new one within the budget, lent to one task
    worker    SlotWriter.begin()    maps it (once per worker); sources carve buffers from it
              SlotWriter.place()    each array of the result: already in the slot -> its offset;
                                    else copied in; what does not fit -> one overflow segment
    consumer  read_result()         numpy views of the slot (torch.from_numpy of them: no copy)
    user      drops the batch       the views die, and the slot is free again

A slot is free when nothing but the ring references its base array (the rule of
``device/buffers.py``): the views handed out, tensors made from them and ``.numpy()`` of those
all keep the base alive, so a batch the user keeps is never overwritten. When every slot is held
and the budget is spent, the pool sends fewer tasks ahead (it waits); with nothing in flight it
sends a task without a slot, whose arrays come in an overflow segment of their own, mapped and
unlinked at once by the consumer and also handed out with no copy.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.errors import WorkerError
from stoker.pipeline.collate import BF16, unflatten
from stoker.pipeline.segments import SHM, map_segment, pages, shm_free, unlink_segment

_ALIGN = 64
_FREE_REFS = 2  # a free slot's base: the Slot's attribute + getrefcount's argument


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


class Slot:
    """One slot: its name, size, and the consumer's mapping (``base``)."""

    __slots__ = ("name", "size", "base", "lent", "pinned")

    def __init__(self, name: str, size: int, base: np.ndarray) -> None:
        self.name, self.size, self.base = name, size, base
        self.lent = False  # a task is writing into it (set by take, cleared when its result came)
        self.pinned = False


class SlotRing:
    """The consumer's slots: lent to tasks, recycled when no batch handed out references them.

    Args:
        token: the pool's name prefix (``<consumer pid>_<random>``).
        limit: slots at most.
        size: the bytes of one task's arrays when known in advance (a hint); else learned from
            the first results (:meth:`learn`).
        pin: ``pin(base) -> bool`` page-locks a new slot (CUDA), ``unpin(base)`` undoes it.
    """

    def __init__(
        self,
        token: str,
        limit: int,
        size: int | None = None,
        pin: Callable[[np.ndarray], bool] | None = None,
        unpin: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        self.token, self.limit = token, max(1, limit)
        self.size = pages(size) if size else None
        self.budget = shm_free() // 2  # bytes of slots at most: half of what /dev/shm has free
        self._pin, self._unpin = pin, unpin
        self._slots: list[Slot] = []
        self._count = 0
        self.retired: list[str] = []  # names of slots given up (workers drop their maps of them)

    def learn(self, needed: int) -> None:
        """A result needed ``needed`` bytes: later slots are at least that big, with some room."""
        if needed and (self.size is None or needed > self.size):
            self.size = pages(needed + needed // 8)

    @property
    def nbytes(self) -> int:
        return sum(s.size for s in self._slots)

    def take(self) -> Slot | None:
        """A free slot lent to one task, a new one within the limits, or None (all are held)."""
        if self.size is None:
            return None
        for slot in list(self._slots):
            if slot.lent or sys.getrefcount(slot.base) != _FREE_REFS:
                continue
            if slot.size >= self.size:
                slot.lent = True
                return slot
            self._retire(slot)  # too small for the batches seen since it was made
        if len(self._slots) >= self.limit or self.nbytes + self.size > self.budget:
            return None
        self._count += 1
        slot = Slot(
            f"stoker_{self.token}_s{self._count}",
            self.size,
            map_segment(f"stoker_{self.token}_s{self._count}", self.size, True),
        )
        if self._pin is not None:
            slot.pinned = self._pin(slot.base)
        self._slots.append(slot)
        slot.lent = True
        return slot

    def _retire(self, slot: Slot) -> None:
        self._slots.remove(slot)
        self.retired.append(slot.name)
        unlink_segment(slot.name)
        if slot.pinned and self._unpin is not None:
            self._unpin(slot.base)

    def close(self) -> None:
        """Unlink every slot; the memory of a batch still held stays mapped until it is dropped."""
        for slot in list(self._slots):
            self._retire(slot)


class SlotWriter:
    """The worker's side: the slot of the task at hand, buffers carved from it, results placed in it."""

    def __init__(self) -> None:
        self._maps: dict[str, np.ndarray] = {}
        self._slot: np.ndarray | None = None
        self._cursor = 0
        self._demand = 0  # bytes this task's arrays need in all (to size later slots)
        self._lock = threading.Lock()

    def forget(self, names: tuple[str, ...]) -> None:
        """Drop this worker's maps of retired slots (their memory is freed once nobody maps them)."""
        for name in names:
            self._maps.pop(name, None)

    def begin(self, slot: tuple[str, int] | None) -> None:
        self._cursor = self._demand = 0
        if slot is None:
            self._slot = None
            return
        name, size = slot
        base = self._maps.get(name)
        if base is None:
            base = self._maps[name] = map_segment(name, size, False)
        self._slot = base

    def end(self) -> None:
        self._slot = None

    def alloc(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray | None:
        """An array carved from the slot (valid for this task), or None when it does not fit or
        no task is running in this process."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        with self._lock:
            if self._slot is None:
                return None
            self._demand += _aligned(nbytes)
            offset = _aligned(self._cursor)
            if offset + nbytes > self._slot.nbytes:
                return None
            self._cursor = offset + nbytes
            return np.ndarray(shape, dtype, buffer=self._slot, offset=offset)

    def _offset(self, arr: np.ndarray) -> int | None:
        """Where ``arr`` lies in the slot, if it was carved from it (and is contiguous)."""
        if self._slot is None or not arr.flags.c_contiguous:
            return None
        start = self._slot.__array_interface__["data"][0]
        ptr = arr.__array_interface__["data"][0]
        if start <= ptr and ptr + arr.nbytes <= start + self._slot.nbytes:
            return ptr - start
        return None

    def place(self, leaves: list[Any], overflow: str) -> tuple[list[Any], str | None, int]:
        """Put the array leaves in the slot: ``(layout, overflow segment or None, bytes needed)``.

        ``layout`` has ``("object", value)`` or ``("array", in_slot, dtype, shape, offset, bf16)``
        per leaf; arrays that fit in no slot go to one new segment named ``overflow``.
        """
        layout: list[Any] = []
        spill: list[tuple[int, np.ndarray]] = []
        spilled = 0
        for leaf in leaves:
            bf16 = isinstance(leaf, BF16)
            arr = leaf.bits if bf16 else leaf
            if not (isinstance(arr, np.ndarray) and arr.dtype.kind in "biufcV" and not arr.dtype.hasobject):
                layout.append(("object", leaf))
                continue
            offset = self._offset(arr)
            if offset is None:
                target = self.alloc(arr.shape, arr.dtype)
                if target is not None:
                    np.copyto(target, arr)
                    offset = self._offset(target)
            if offset is not None:
                layout.append(("array", True, arr.dtype.str, arr.shape, offset, bf16))
                continue
            spilled = _aligned(spilled)
            layout.append(("array", False, arr.dtype.str, arr.shape, spilled, bf16))
            spill.append((spilled, arr))
            spilled += arr.nbytes
            if self._slot is None:
                self._demand += _aligned(arr.nbytes)
        if not spill:
            return layout, None, self._demand
        base = map_segment(overflow, pages(spilled), True)
        try:
            for offset, arr in spill:
                np.ndarray(arr.shape, arr.dtype, buffer=base, offset=offset)[...] = arr
        except BaseException:
            unlink_segment(overflow)  # a half-written segment nobody will read
            raise
        return layout, overflow, self._demand


class SlotBuffers(BufferPool):
    """A :class:`BufferPool` whose buffers, inside a worker process's task, are carved from the
    task's slot, so a source that fills ``get``'s arrays writes its batch straight into shared
    memory. Elsewhere (the consumer, threads) it is a plain recycling pool."""

    def __init__(self, writer: SlotWriter | None = None) -> None:
        super().__init__()
        self.writer = writer or SlotWriter()

    def get(self, key: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        arr = self.writer.alloc(tuple(shape), np.dtype(dtype))
        return arr if arr is not None else super().get(key, shape, dtype)


@dataclass
class SlotPlan:
    """How a pool makes its slots.

    Attributes:
        buffers: the pool its source takes buffers from (carved from the slot in a worker).
        size: the bytes of one task's arrays when known in advance (learned otherwise).
        pin: page-lock each slot once for CUDA copies (``device/pinning.py``).
    """

    buffers: SlotBuffers | None = None
    size: int | None = None
    pin: bool = False

    def ring(self, token: str) -> SlotRing:
        pin = unpin = None
        if self.pin:
            from stoker.device.pinning import register_host, unregister_host

            pin, unpin = register_host, unregister_host
        return SlotRing(token, limit=8, size=self.size, pin=pin, unpin=unpin)


def read_result(layout: list[Any], spec: Any, slot: Slot | None, overflow: str | None) -> Any:
    """The result of a task as views of its slot and overflow segment (no copy)."""
    spill = None
    if overflow is not None:
        size = os.stat(os.path.join(SHM, overflow)).st_size
        spill = map_segment(overflow, size, False)
        unlink_segment(overflow)  # mapped here now: the name can go, the memory stays while it is viewed
    leaves: list[Any] = []
    for entry in layout:
        if entry[0] == "object":
            leaves.append(entry[1])
            continue
        _, in_slot, dtype, shape, offset, bf16 = entry
        base = slot.base if in_slot and slot is not None else spill
        if base is None:
            raise WorkerError(f"a worker's result lists an array in shared memory that did not come with it: {entry}")
        arr = np.ndarray(shape, np.dtype(dtype), buffer=base, offset=offset)
        leaves.append(BF16(arr) if bf16 else arr)
    return unflatten(spec, leaves)


__all__ = ["Slot", "SlotBuffers", "SlotPlan", "SlotRing", "SlotWriter", "read_result"]
