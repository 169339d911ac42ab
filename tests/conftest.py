"""Shared fixtures; CUDA tests are skipped where torch sees no GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

import stoker

# Hypothesis times each example (deadline, 200 ms by default) and its data generation (too_slow):
# both fail on a loaded machine, not on a bug. Tests here assert on results, never on time.
settings.register_profile("stoker", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("stoker")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; torch sees none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def mixed_columns():
    """One column of every kind, 300 rows."""
    n = 300
    rng = np.random.default_rng(7)
    return {
        "image": rng.integers(0, 255, size=(n, 4, 5, 3), dtype=np.uint8),
        "label": np.arange(n, dtype=np.int64),
        "score": rng.random(n).astype(np.float32),
        "ids": [rng.integers(0, 30000, size=int(k), dtype=np.int32) for k in rng.integers(0, 12, size=n)],
        "blob": [bytes(rng.integers(0, 255, size=int(k), dtype=np.uint8)) for k in rng.integers(0, 40, size=n)],
        "text": [f"row {i} é" for i in range(n)],
    }


@pytest.fixture
def mixed_store(tmp_path, mixed_columns):
    """A store of mixed_columns split over several shards."""
    path = tmp_path / "mixed"
    stoker.write(path, mixed_columns, shard_size=4096)
    return path


@pytest.fixture
def shm_clean():
    """Fails the test if this process leaves stoker segments in /dev/shm (other processes' are not ours)."""
    prefix = f"stoker_{os.getpid()}_"
    yield
    if os.path.isdir("/dev/shm"):
        left = sorted(f for f in os.listdir("/dev/shm") if f.startswith(prefix))
        assert not left, f"left in /dev/shm: {left}"


def _in_thread(fn):
    """Run ``fn`` in a thread that then ends; return what it returned or raised (a hang fails the test)."""
    import threading

    out = []

    def run():
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join(300)  # a bound for a hang, not a speed
    assert not t.is_alive(), "the thread hung"
    return out[0]


@pytest.fixture
def in_thread():
    """``in_thread(fn)``: run ``fn`` in a thread that then ends and return its result or exception."""
    return _in_thread
