"""Loaders created, read with a break and dropped leak nothing (issue 15; ``scripts/reliability.py`` does 300).

60 loaders, a third of each kind: a store read by threads, a torch Dataset read by worker
processes, persistent workers closed by ``with``. Open fds, live threads and this process's
``/dev/shm`` segments must not grow; RSS may grow by at most 20 % (allocator noise, not a leak).
"""

from __future__ import annotations

import gc
import os
import threading

import numpy as np
import pytest
import torch

import stoker

pytestmark = pytest.mark.faults


class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return 256

    def __getitem__(self, i):
        return np.full(16, i, dtype=np.float32)


def _rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _snapshot():
    gc.collect()
    prefix = f"stoker_{os.getpid()}_"
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": len(threading.enumerate()),
        "shm": len([f for f in os.listdir("/dev/shm") if f.startswith(prefix)]) if os.path.isdir("/dev/shm") else 0,
        "rss": _rss_kib(),
    }


def _read_and_break(loader, batches=3):
    for i, batch in enumerate(loader):
        assert batch is not None
        if i + 1 == batches:
            break


def _one(kind, store):
    if kind == 0:
        _read_and_break(stoker.Loader(store, batch_size=16, shuffle=True, num_workers=2))
    elif kind == 1:
        _read_and_break(stoker.Loader(Rows(), batch_size=16, shuffle=True, num_workers=2))
    else:
        with stoker.Loader(Rows(), batch_size=16, num_workers=2, persistent_workers=True) as loader:
            _read_and_break(loader)
            _read_and_break(loader)  # a second epoch on the same workers


def test_sixty_loaders_leak_no_fd_thread_segment_or_memory(tmp_path):
    store = stoker.write(tmp_path / "s", {"x": np.zeros((512, 64), np.uint8), "y": np.arange(512)})
    for kind in range(3):  # warm-up: imports and first-use caches are not leaks
        _one(kind, store)
    before = _snapshot()
    for i in range(60):
        _one(i % 3, store)
    after = _snapshot()
    assert after["fds"] <= before["fds"], (before, after)
    assert after["threads"] <= before["threads"], (before, after, threading.enumerate())
    assert after["shm"] <= before["shm"], (before, after)
    assert after["rss"] <= before["rss"] * 1.2, (before, after)
