"""The block order's sizes (``shuffle="block"``): ``block_size`` and ``window`` fitted to memory and to a cache.

A window of ``block_size * window`` rows is read in random order, so all of it must stay in memory
while it is read: the pages of a mapped local store, and, for a remote store, the cached shards
it touches. The defaults (4096 rows x 16 blocks) are kept where they fit; where they do not, and
the user set neither size, :func:`block_order` shrinks them:

* **memory**: the window's bytes (rows x the store's bytes per row) at most a quarter of the memory
  the process may use (:func:`memory_limit`: the cgroup v2 or v1 limit, else physical RAM,
  ``STOKER_MEMORY_LIMIT`` to override), rounded down to a power of two so that nodes with nearly
  equal memory choose alike. Ranks on one node read the same window at the same time (the ranks
  split one global order), so they share its pages; the quarter leaves room for the model, the
  batches in flight and the page cache of everything else. ``block_size`` halves first (not below
  twice the disk's read-around, at least 1 MiB, of rows: see :func:`fit_memory`), then ``window``.
* **a remote cache** smaller than the store: a block is one shard's rows (so a fetched shard is
  read whole while it is cached; a smaller block would fetch a shard once per block, up to
  ``rows per shard / block_size`` times an epoch), and the window's shards fill at most half of
  ``cache_limit`` (the loader fetches half a window ahead).

Available memory is left out on purpose: it changes from run to run and from node to node, and
the order must be the same on every rank and after a resume (``pipeline/ranks.py`` compares the
ranks' orders; ``state_dict`` holds it).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.pipeline.orders import BLOCK_SIZE, WINDOW
from stoker.pipeline.subset import Subset
from stoker.settings import env
from stoker.store.reader import Store
from stoker.store.sizes import parse_size

MEMORY_SHARE = 4  # the window takes at most 1/MEMORY_SHARE of the memory limit
CACHE_SHARE = 2  # a remote window's shards take at most 1/CACHE_SHARE of cache_limit
READ_AROUND = 128 * 2**10  # the kernel's read-around of a mapped file where the device's is unknown
LIMIT_ENV = "STOKER_MEMORY_LIMIT"
_UNLIMITED = 2**60  # cgroup v1 says "no limit" with a number near 2**63


@dataclass(frozen=True)
class BlockOrder:
    """The block order's sizes and why: ``str()`` says both (``loader.block_order``)."""

    block_size: int
    window: int
    why: str

    @property
    def sizes(self) -> tuple[int, int]:
        """``(block_size, window)``."""
        return self.block_size, self.window

    def __str__(self) -> str:
        return f"block_size={self.block_size}, window={self.window}: {self.why}"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"


def _cgroup_limit(proc: Path, root: Path) -> tuple[int, str] | None:
    """The lowest memory limit of this process's cgroup and its parents (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), with the file that sets it; None without one."""
    found: list[tuple[int, str]] = []
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base, name = root, "memory.max"  # v2: the unified hierarchy
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        here = base / path.lstrip("/")
        for folder in [here, *here.parents]:  # a parent's limit binds too; a namespaced path may not exist
            if not folder.is_relative_to(base):
                break
            try:
                text = (folder / name).read_text().strip()
            except OSError:
                continue
            if text.isdigit() and int(text) < _UNLIMITED:
                found.append((int(text), str(folder / name)))
    return min(found) if found else None


def memory_limit(proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> tuple[int, str]:
    """The bytes this process may use and where that figure comes from: ``STOKER_MEMORY_LIMIT`` when set,
    else the lower of the cgroup's memory limit and physical RAM."""
    given = env(LIMIT_ENV)
    if given is not None:
        try:
            return parse_size(given), f"{LIMIT_ENV}={given}"
        except ConfigError:  # its message speaks of shard_size
            raise ConfigError(
                f"{LIMIT_ENV}={given!r} is not a size; give bytes or a size such as '8GB'", option=LIMIT_ENV
            ) from None
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    cgroup = _cgroup_limit(proc, root)
    if cgroup is not None and cgroup[0] < ram:
        return cgroup[0], f"the cgroup memory limit ({cgroup[1]})"
    return ram, "physical RAM"


def _pow2_floor(n: float) -> int:
    return 1 << max(0, int(n).bit_length() - 1) if n >= 1 else 1


def backing_store(source: Any) -> Store | None:
    """The store whose rows ``source`` reads (through subsets, a store source, a text or image source), or None."""
    inner = source
    while isinstance(inner, Subset):
        inner = inner.dataset
    store = getattr(inner, "store", None)
    if store is None:
        store = getattr(getattr(inner, "rows", None), "store", None)  # a text source of a store
    return store if isinstance(store, Store) else None


def window_rows(row_bytes: float, memory: int) -> int:
    """The most rows a window may hold: a quarter of ``memory``, rounded down to a power of two, in rows."""
    return max(1, int(_pow2_floor(memory / MEMORY_SHARE) // max(row_bytes, 1.0)))


def read_around(path: Path) -> int:
    """The bytes the kernel reads around a page fault of a file mapped from ``path``'s device (its
    ``read_ahead_kb``; a partition's is its disk's), :data:`READ_AROUND` where unknown (tmpfs, overlay)."""
    try:
        dev = os.stat(path).st_dev
        node = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
        for queue in (node / "queue", node.parent / "queue"):
            if (queue / "read_ahead_kb").exists():
                return max(4096, int((queue / "read_ahead_kb").read_text()) * 1024)
    except (OSError, ValueError):
        pass
    return READ_AROUND


def fit_memory(rows: int, row_bytes: float, memory: str, num_rows: int, around: int = READ_AROUND) -> BlockOrder:
    """The defaults when their window (or the whole store of ``num_rows``) holds at most ``rows``; else
    ``block_size`` halved, then ``window``, until it does. A block keeps at least twice the read-around
    ``around`` (at least 1 MiB) of rows: a fault reads that much around the row asked for, and the pages
    read outside the window are wasted."""
    if min(BLOCK_SIZE * WINDOW, num_rows) <= rows:
        return BlockOrder(BLOCK_SIZE, WINDOW, f"the defaults: their window fits a quarter of {memory}")
    least = max(2**20, 2 * around)
    floor = min(BLOCK_SIZE, 1 << max(0, math.ceil(math.log2(max(1.0, least / max(row_bytes, 1.0))))))
    block = min(max(floor, _pow2_floor(rows / WINDOW)), BLOCK_SIZE, _pow2_floor(rows))
    window = max(1, min(WINDOW, rows // block))
    return BlockOrder(block, window, f"the window ({_mib(block * window * row_bytes)}) fits a quarter of {memory}")


def fit_cache(store: Store, cache_limit: int, rows: int) -> BlockOrder:
    """For a remote store larger than its cache: one shard's rows a block, the window's shards in half
    the cache (and its rows within ``rows``)."""
    shards = store.manifest.shards
    per_shard = max(1, int(np.median([s.rows for s in shards])))
    biggest = max(s.bytes for s in shards)
    per_block = 1 if all(s.rows == per_shard for s in shards[:-1]) else 2  # aligned blocks touch one shard
    window = max(1, min(WINDOW, rows // per_shard, cache_limit // CACHE_SHARE // (biggest * per_block)))
    why = (
        f"a block is one shard ({per_shard} rows), and the window's {window * per_block} shard(s) of at most "
        f"{_mib(biggest)} fill at most half of cache_limit ({_mib(cache_limit)})"
    )
    if biggest * per_block > cache_limit // CACHE_SHARE:
        why += "; the shards are too large for this cache: raise cache_limit or write smaller shards (shard_size=)"
    return BlockOrder(per_shard, window, why)


def block_order(source: Any, block_size: int | None, window: int | None, order: str) -> BlockOrder:
    """``block_size`` and ``window`` for ``source``: as given, else sized (see the module docstring);
    with one given, the other is its default, made smaller where the window would not fit."""
    if block_size is not None and window is not None:
        return BlockOrder(block_size, window, "set by the user")
    store = backing_store(source)
    if order != "block" or store is None or len(store) == 0:
        why = "unused (shuffle is not 'block')" if order != "block" else "the defaults (the rows are not a store's)"
        return BlockOrder(block_size or BLOCK_SIZE, window or WINDOW, why)
    memory, where = memory_limit()
    said = f"{_mib(memory)} ({where})"
    row_bytes = store.nbytes / len(store)
    rows = window_rows(row_bytes, memory)
    if block_size is not None:
        return BlockOrder(block_size, max(1, min(WINDOW, rows // block_size)), f"block_size set; window fits {said}")
    if window is not None:
        return BlockOrder(max(1, min(BLOCK_SIZE, rows // window)), window, f"window set; block_size fits {said}")
    cache = getattr(store.remote, "cache_limit", None)
    if isinstance(cache, int) and cache < store.nbytes:
        return fit_cache(store, cache, rows)
    return fit_memory(rows, row_bytes, said, len(store), read_around(store.path))


__all__ = ["BLOCK_SIZE", "LIMIT_ENV", "WINDOW", "BlockOrder", "backing_store", "block_order", "memory_limit"]
