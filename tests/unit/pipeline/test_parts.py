"""Row copies cut into ranges and shared among the worker threads of a pool (pipeline/parts.py)."""

import threading
import weakref

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.pipeline.parts import (
    PART_BYTES,
    PARTS_PER_THREAD,
    SPLIT_BYTES,
    SPLIT_ENV,
    part_bounds,
    run_parts,
    split_mode,
)
from stoker.pipeline.threads import ordered_map


@pytest.fixture(autouse=True)
def always_split(monkeypatch):
    """Cut copies (the default, ``never``, would not)."""
    monkeypatch.setenv(SPLIT_ENV, "always")


@pytest.mark.parametrize(
    ("rows", "row_bytes", "threads"),
    [(512, 12288, 2), (256, 150528, 16), (7, PART_BYTES, 2), (3, 10 * PART_BYTES, 4), (100_000, 8, 2), (2, 2**30, 64)],
)
def test_part_bounds_cover_every_row_once(rows, row_bytes, threads):
    bounds = part_bounds(rows, row_bytes, threads)
    assert bounds[0] == 0 and bounds[-1] == rows
    assert np.all(np.diff(bounds) >= 1)  # no empty range, no overlap
    assert len(bounds) - 1 <= threads * PARTS_PER_THREAD
    if len(bounds) > 2:
        assert rows * row_bytes >= SPLIT_BYTES
        assert np.diff(bounds).min() * row_bytes >= PART_BYTES * 0.5  # ranges of about PART_BYTES or more


def test_small_copies_and_single_threads_are_not_cut():
    assert part_bounds(1000, (SPLIT_BYTES - 1) // 1000, 8).tolist() == [0, 1000]
    assert part_bounds(1000, 2**20, 1).tolist() == [0, 1000]
    assert part_bounds(1, 2**30, 8).tolist() == [0, 1]
    assert len(part_bounds(64, 2**20, 2)) > 2


def test_outside_a_pool_the_copy_runs_in_one_piece():
    calls = []
    run_parts(64, 2**20, lambda a, b: calls.append((a, b, threading.current_thread().name)))
    assert calls == [(0, 64, threading.current_thread().name)]


def test_in_a_pool_another_worker_thread_copies_a_range():
    """The first range claimed waits until another thread has claimed a range: with no help the
    copy would never finish, and the test fails after 20 s instead of hanging."""
    claimed = []
    helped = threading.Event()
    lock = threading.Lock()

    def copy(a, b):
        me = threading.current_thread().name
        with lock:
            claimed.append((a, b, me))
            first = len(claimed) == 1
            if len({name for _, _, name in claimed}) > 1:
                helped.set()
        if first:
            assert helped.wait(20), "no other worker thread took a range"

    def task(i):
        run_parts(16, PART_BYTES, copy)
        return i

    assert list(ordered_map(task, [7], workers=2, depth=1)) == [7]
    ranges = sorted((a, b) for a, b, _ in claimed)
    assert ranges[0][0] == 0 and ranges[-1][1] == 16
    assert all(x[1] == y[0] for x, y in zip(ranges, ranges[1:]))  # every row exactly once
    assert len({name for _, _, name in claimed}) == 2


def test_an_error_in_any_range_is_raised_by_the_owner_with_its_type():
    def copy(a, b):
        if a > 0:
            raise KeyError(f"range {a}")

    def task(i):
        run_parts(32, PART_BYTES, copy)

    with pytest.raises(KeyError, match="range"):
        list(ordered_map(task, range(3), workers=2, depth=2))


def test_busy_pools_split_many_copies_without_deadlock_and_every_slice_lands_in_place():
    src = np.arange(300 * 4096, dtype=np.int64).reshape(300, 4096)  # rows of 32 KiB
    rng = np.random.default_rng(0)
    orders = [np.sort(rng.choice(300, size=200, replace=False)) for _ in range(24)]

    def task(rows):
        out = np.empty((len(rows), 4096), np.int64)

        def copy(a, b):
            np.take(src, rows[a:b], axis=0, out=out[a:b], mode="clip")

        run_parts(len(rows), out[0].nbytes, copy)
        return out

    for workers in (2, 3):
        for rows, out in zip(orders, ordered_map(task, orders, workers=workers, depth=2 * workers)):
            np.testing.assert_array_equal(out, src[rows])


def test_an_offered_copy_is_dropped_once_it_is_done():
    """A range offered while every other thread is busy stays on offer; it must not keep the copy
    (and the batch buffer it fills) alive, or the loader's buffer pool could not recycle that buffer."""
    b_started, release = threading.Event(), threading.Event()

    def task(i):
        if i == "B":  # keeps the other worker thread busy while A offers its ranges
            b_started.set()
            return release.wait(20)
        assert b_started.wait(20)
        out = np.zeros(64, np.int64)

        def copy(a, b):
            out[a:b] = 1

        ref = weakref.ref(copy)
        run_parts(64, PART_BYTES, copy)
        del copy
        return (out == 1).all(), ref() is None  # checked before this thread looks at the offers again

    results = ordered_map(task, ["A", "B"], workers=2, depth=2)
    try:
        filled, dropped = next(results)
    finally:
        release.set()
    assert filled
    assert dropped, "the finished copy is still referenced by its offer"
    assert list(results) == [True]


@pytest.mark.parametrize("env", ["never", None])
def test_never_and_the_default_copy_in_one_piece_in_a_pool(monkeypatch, env):
    """Unset means never: the default cut copies into ranges whenever the load average left a core
    spare (the old ``auto``), on a quiet machine 0.64-0.68x the batches of one copy per thread."""
    if env is None:
        monkeypatch.delenv(SPLIT_ENV, raising=False)
    else:
        monkeypatch.setenv(SPLIT_ENV, env)
    calls = []

    def task(i):
        run_parts(64, PART_BYTES, lambda a, b: calls.append((a, b)))
        return i

    assert list(ordered_map(task, range(3), workers=2, depth=2)) == [0, 1, 2]
    assert calls == [(0, 64)] * 3


def test_split_mode_is_read_when_called_and_checked(monkeypatch):
    monkeypatch.delenv(SPLIT_ENV, raising=False)
    assert split_mode() == "never"
    monkeypatch.setenv(SPLIT_ENV, " Always ")
    assert split_mode() == "always"
    monkeypatch.setenv(SPLIT_ENV, "sometimes")
    with pytest.raises(ConfigError, match="STOKER_SPLIT_COPIES='sometimes'") as info:
        split_mode()
    assert info.value.option == SPLIT_ENV

    def task(i):
        run_parts(64, PART_BYTES, lambda a, b: None)

    with pytest.raises(ConfigError, match="or say always"):
        list(ordered_map(task, range(1), workers=2, depth=1))


def test_auto_is_refused_with_a_message(monkeypatch):
    monkeypatch.setenv(SPLIT_ENV, "auto")
    with pytest.raises(ConfigError, match="auto was removed"):
        split_mode()
