"""Flat arrays that grow by appending: in memory, or in a memory-mapped temporary file past a size.

A :class:`FlatArray` starts in memory; past ``STOKER_TEXT_CACHE_MEMORY`` bytes (default 1 GiB) it
moves to a file in a :class:`SpillDir` (``<tempdir>/stoker-text-<pid>-<random>/``) and grows
there; views taken before a growth stay valid. The directory goes when the cache is closed or
collected; :func:`sweep_stale` (run before each new one) removes those of dead processes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.settings import env
from stoker.store.replace import pid_alive

MEMORY_ENV = "STOKER_TEXT_CACHE_MEMORY"
DEFAULT_MEMORY = 1 << 30
PREFIX = "stoker-text-"


def memory_limit() -> int:
    """Bytes a cache array may hold in memory before it moves to a file (``STOKER_TEXT_CACHE_MEMORY``)."""
    raw = env(MEMORY_ENV)
    if raw is None or raw == "":
        return DEFAULT_MEMORY
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(
            f"{MEMORY_ENV}={raw!r} must be a whole number of bytes >= 0 (0: always spill to a temporary file)",
            option=MEMORY_ENV,
        )
    return value


def sweep_stale(directory: str | None = None) -> int:
    """Remove ``stoker-text-<pid>-*`` directories under ``directory`` (the temp dir) whose process is gone."""
    base = directory or tempfile.gettempdir()
    removed = 0
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return 0
    for name in names:
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        removed += 1
    return removed


class SpillDir:
    """One cache's temporary directory, made on first use (after a sweep) and removed by :meth:`remove`."""

    def __init__(self) -> None:
        self.path: str | None = None

    def get(self) -> str:
        if self.path is None:
            sweep_stale()
            self.path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
        return self.path

    def remove(self) -> None:
        """Delete the directory and its files (maps still open stay readable until dropped). Idempotent."""
        path, self.path = self.path, None
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


class FlatArray:
    """A 1-D array grown by :meth:`append`; ``array[:used]`` holds what was appended.

    Growth doubles the capacity. In memory, the old contents are copied to a new array; in a
    file, the file is extended and mapped again. ``array`` is replaced, never changed in place
    below ``used``, so a reader that took ``array`` keeps a valid view of what it could see.
    Not thread-safe for writers: the cache appends under its lock.
    """

    def __init__(self, dtype: Any, name: str, limit: int, spill: SpillDir) -> None:
        self.dtype = np.dtype(dtype)
        self.name, self.limit, self.spill = name, limit, spill
        self.array: np.ndarray = np.empty(0, self.dtype)
        self.used = 0
        self.path: str | None = None

    def append(self, values: np.ndarray) -> int:
        """Append ``values``; returns where they start."""
        start, end = self.used, self.used + len(values)
        if end > len(self.array):
            self._grow(end)
        self.array[start:end] = values
        self.used = end
        return start

    def _grow(self, need: int) -> None:
        capacity = max(need, 2 * len(self.array), 1 << 16)
        nbytes = capacity * self.dtype.itemsize
        old, used = self.array, self.used
        if self.path is None and nbytes > self.limit:
            self.path = os.path.join(self.spill.get(), f"{self.name}.bin")
            open(self.path, "wb").close()
            copy = True
        else:
            copy = self.path is None
        if self.path is None:
            new = np.empty(capacity, self.dtype)
        else:
            with open(self.path, "r+b") as f:
                f.truncate(nbytes)
            new = np.memmap(self.path, self.dtype, "r+", shape=(capacity,))
        if copy and used:
            new[:used] = old[:used]
        self.array = new


__all__ = ["DEFAULT_MEMORY", "MEMORY_ENV", "PREFIX", "FlatArray", "SpillDir", "memory_limit", "sweep_stale"]
