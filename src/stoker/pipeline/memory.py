"""Memory of a process tree as the kernel accounts it: PSS, USS and RSS, shared pages counted once.

Summed RSS counts a page once per process that maps it: a loader whose worker processes share
the parent's pages (fork, shared-memory batch slots, a mapped store) looks several times its
size. PSS (proportional set size) splits each page among the processes that map it, so the PSS
of a tree counts a page shared inside it once; USS (unique set size: private pages) is what
ending a process would free. Both come from ``/proc/PID/smaps_rollup`` (Linux >= 4.14); where it
is missing (another OS, a process of another user) a process counts its RSS alone, from
``/proc/PID/statm``, and :attr:`Memory.exact` says so.

    loader.memory()                       # this process and its workers, now
    tree_memory(pid)                      # any process and its descendants

Standard library only: the peers benchmark loads this file by path in environments without
stoker (``benchmarks/peers/child.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

# smaps_rollup lines -> Memory fields (kB in the file, bytes in Memory)
_ROLLUP = {
    "Rss": "rss",
    "Pss": "pss",
    "Pss_Anon": "pss_anon",
    "Pss_File": "pss_file",
    "Pss_Shmem": "pss_shmem",
    "Private_Clean": "uss",
    "Private_Dirty": "uss",
    "Swap": "swap",
}


@dataclass(frozen=True)
class Memory:
    """Bytes of memory of one process or the sum over a tree (see the module docstring).

    Attributes:
        pss: proportional set size: each resident page divided among the processes mapping it.
        uss: unique set size: pages only this process maps (private clean + private dirty).
        rss: resident set size (shared pages counted in every process mapping them).
        pss_anon, pss_file, pss_shmem: ``pss`` split into anonymous memory, mapped files
            (a memory-mapped store's pages read so far among them) and shared memory (``/dev/shm``).
        swap: bytes swapped out.
        processes: how many processes were measured.
        exact: False when some process gave only its RSS (no ``smaps_rollup``): then its RSS stands
            in for its PSS and USS.
    """

    pss: int = 0
    uss: int = 0
    rss: int = 0
    pss_anon: int = 0
    pss_file: int = 0
    pss_shmem: int = 0
    swap: int = 0
    processes: int = 0
    exact: bool = True

    def __add__(self, other: Memory) -> Memory:
        sums = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "exact"}
        return Memory(**sums, exact=self.exact and other.exact)

    def peak(self, other: Memory) -> Memory:
        """Each figure the larger of the two (a running peak over samples)."""
        tops = {f.name: max(getattr(self, f.name), getattr(other, f.name)) for f in fields(self) if f.name != "exact"}
        return Memory(**tops, exact=self.exact and other.exact)

    def __str__(self) -> str:
        mib = 2**20
        return (
            f"PSS {self.pss / mib:,.0f} MiB (anonymous {self.pss_anon / mib:,.0f}, mapped files "
            f"{self.pss_file / mib:,.0f}, shared memory {self.pss_shmem / mib:,.0f}), USS {self.uss / mib:,.0f} MiB, "
            f"RSS {self.rss / mib:,.0f} MiB over {self.processes} process{'es' if self.processes != 1 else ''}"
            + ("" if self.exact else " (some processes gave RSS only)")
        )


def process_memory(pid: int) -> Memory | None:
    """The memory of process ``pid``, or None when it is gone or cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            text = f.read()
    except OSError:
        text = ""
    if text:
        got: dict[str, Any] = dict.fromkeys(_ROLLUP.values(), 0)
        for line in text.splitlines()[1:]:
            key, _, rest = line.partition(":")
            name = _ROLLUP.get(key)
            if name is not None:
                got[name] += int(rest.split()[0]) * 1024
        return Memory(**got, processes=1)
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return None
    return Memory(pss=resident, uss=resident, rss=resident, pss_anon=resident, processes=1, exact=False)


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children of each of its threads, recursively; Linux)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", encoding="ascii") as f:
                    kids = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def tree_memory(pid: int | None = None) -> Memory:
    """The memory of ``pid`` (default: this process) and all its descendants, summed: a page
    shared inside the tree counts once in ``pss``, in every process in ``rss``."""
    root = os.getpid() if pid is None else pid
    total = Memory()
    for p in [root, *descendants(root)]:
        got = process_memory(p)
        if got is not None:
            total = total + got
    return total


__all__ = ["Memory", "descendants", "process_memory", "tree_memory"]
