"""Batches through POSIX shared memory: a worker writes the arrays of a result into one segment,
the consumer maps it, unlinks its name at once and copies the arrays out.

Only a small layout (dtypes, shapes, offsets; small objects inline) travels beside the segment.
Segment names start with ``stoker_<consumer pid>_``, so :func:`sweep_stale_segments` can remove
what a killed consumer left.
"""

from __future__ import annotations

import glob
import os
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from stoker.pipeline.collate import BF16, unflatten


def write_segment(name: str, leaves: list[Any]) -> tuple[list[Any], bool]:
    """Put the array leaves in a new segment; returns per-leaf layout and whether one was made."""
    layout: list[Any] = []
    offset = 0
    arrays = []
    for leaf in leaves:
        bf16 = isinstance(leaf, BF16)
        arr = leaf.bits if bf16 else leaf
        if isinstance(arr, np.ndarray) and arr.dtype.kind in "biufcV":
            offset = -(-offset // 64) * 64
            layout.append(("array", arr.dtype.str, arr.shape, offset, bf16))
            arrays.append((offset, arr))
            offset += arr.nbytes
        else:
            layout.append(("object", leaf))
    if not arrays:
        return layout, False
    shm = shared_memory.SharedMemory(name=name, create=True, size=max(offset, 1))
    try:
        for off, arr in arrays:
            np.ndarray(arr.shape, arr.dtype, buffer=shm.buf, offset=off)[...] = arr
    except BaseException:
        shm.close()
        shm.unlink()  # a half-written segment nobody will read
        raise
    shm.close()
    _untrack(name)
    return layout, True


def _untrack(name: str) -> None:
    # The consumer unlinks the segment; keep this process's resource tracker from doing it too.
    try:
        from multiprocessing import resource_tracker

        resource_tracker.unregister("/" + name, "shared_memory")
    except Exception:  # noqa: BLE001 - bookkeeping only; the sweep in close() covers leftovers
        pass


def sweep_stale_segments(directory: str = "/dev/shm") -> int:
    """Unlink stoker segments whose consumer process is gone (it was killed before cleaning up).

    Segment names start with the consumer's pid (``stoker_<pid>_...``). Returns how many went.
    """
    removed = 0
    for path in glob.glob(os.path.join(directory, "stoker_*")):
        parts = os.path.basename(path).split("_")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            continue  # alive (or not ours to judge)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def read_segment(name: str | None, layout: list[Any], spec: Any) -> Any:
    leaves: list[Any] = []
    shm = shared_memory.SharedMemory(name=name) if name else None
    if shm is not None:
        shm.unlink()  # mapped here now: the name can go, the memory stays until closed
    try:
        for entry in layout:
            if entry[0] == "object":
                leaves.append(entry[1])
                continue
            if shm is None:
                raise RuntimeError(f"the layout lists an array but no shared-memory segment came with it: {entry}")
            _, dtype, shape, offset, bf16 = entry
            arr = np.ndarray(shape, np.dtype(dtype), buffer=shm.buf, offset=offset).copy()
            leaves.append(BF16(arr) if bf16 else arr)
    finally:
        if shm is not None:
            shm.close()
    return unflatten(spec, leaves)


def unlink_segment(name: str) -> None:
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return
    shm.close()
    shm.unlink()


__all__ = ["read_segment", "sweep_stale_segments", "unlink_segment", "write_segment"]
