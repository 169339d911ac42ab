"""Memory of a real process tree: PSS counts pages shared with a forked child once, summed RSS twice."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from stoker.pipeline.memory import Memory, descendants, process_memory, tree_memory

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/self/smaps_rollup").exists(),
    reason="PSS needs Linux's /proc/PID/smaps_rollup",
)


def test_a_forked_child_sharing_an_array_counts_once_in_pss() -> None:
    shared = np.ones(64 * 2**20, dtype=np.uint8)  # 64 MiB, touched: resident in the parent before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reads the array (its pages stay shared) and waits to be measured
        os.close(read)
        total = int(shared[::4096].sum())
        os.write(write, b"1" if total else b"0")
        signal.pause()
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
        assert pid in descendants(os.getpid())
        parent, child = process_memory(os.getpid()), process_memory(pid)
        tree = tree_memory()
        assert parent is not None and child is not None
        assert child.rss >= 60 * 2**20  # the child maps the shared pages...
        assert child.uss < 16 * 2**20  # ...but owns few of its own
        pair = parent + child  # the tree may hold other children of the test run: compare these two
        assert tree.processes >= 2 and tree.exact
        assert pair.pss < pair.rss - 48 * 2**20  # the 64 MiB counted once, not twice
        assert pair.pss >= 64 * 2**20
        assert pair.uss < pair.pss < pair.rss
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
    del shared


def test_sums_peaks_and_words() -> None:
    a = Memory(pss=3, uss=1, rss=5, processes=1)
    b = Memory(pss=2, uss=2, rss=4, processes=1, exact=False)
    assert a + b == Memory(pss=5, uss=3, rss=9, processes=2, exact=False)
    assert a.peak(b) == Memory(pss=3, uss=2, rss=5, processes=1, exact=False)
    assert "PSS" in str(a) and "1 process" in str(a)


def test_a_gone_process_is_none() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    assert process_memory(pid) is None


def test_a_loader_reports_its_tree() -> None:
    import stoker

    loader = stoker.Loader(stoker.sources.Arrays(np.zeros((64, 4), dtype=np.float32)), batch_size=16)
    next(iter(loader))
    memory = loader.memory()
    assert memory.processes >= 1 and memory.pss > 0 and memory.uss <= memory.rss
