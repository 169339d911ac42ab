"""The one executor: the same results, in order, on threads, processes or inline; errors tagged."""

from __future__ import annotations

import os

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.pipeline.executor import Executor, chunk_size, chunked, growing_chunks, pass_tasks
from stoker.pipeline.schedule import Schedule


def _square_chunk(chunk):
    return [{"x": np.asarray(idx) ** 2, "pid": np.asarray(os.getpid())} for idx in chunk]


def _fail_on_seven(chunk):
    for idx in chunk:
        if 7 in idx:
            raise KeyError(f"row 7 in {idx.tolist()}")
    return [idx for idx in chunk]


def _chunks():
    return list(chunked((np.arange(i, i + 3) for i in range(0, 30, 3)), 2))


@pytest.mark.parametrize(("method", "workers"), [("threads", 0), ("threads", 2), ("processes", 0), ("processes", 2)])
def test_every_method_gives_the_same_results_in_order(method, workers):
    executor = Executor(_square_chunk, Schedule(method, workers, prefetch=2))
    out = [b for chunk in executor.map(_chunks()) for b in chunk]
    assert [b["x"].tolist() for b in out] == [[i * i for i in range(j, j + 3)] for j in range(0, 30, 3)]
    pids = {int(b["pid"]) for b in out}
    assert (os.getpid() in pids) == (method == "threads" or workers == 0)
    assert executor.in_processes == (method == "processes" and workers > 0)


@pytest.mark.parametrize("method", ["threads", "processes"])
def test_a_worker_error_comes_back_as_itself_naming_the_stage(method):
    executor = Executor(_fail_on_seven, Schedule(method, 2, prefetch=1), stage="read")
    with pytest.raises(KeyError, match="row 7") as info:
        list(executor.map(_chunks()))
    assert any("stage 'read'" in note for note in getattr(info.value, "__notes__", []))


def test_persistent_processes_serve_many_maps_until_closed():
    executor = Executor(_square_chunk, Schedule("processes", 2, prefetch=1), persistent=True)
    pids = [{int(b["pid"]) for chunk in executor.map(_chunks()) for b in chunk} for _ in range(2)]
    assert pids[0] == pids[1] and os.getpid() not in pids[0]
    executor.close()
    executor.close()  # idempotent


def test_an_unknown_method_is_refused():
    with pytest.raises(ConfigError, match="engine"):
        Executor(_square_chunk, Schedule("fibers", 2, prefetch=1))


def test_chunks_hold_about_a_mebibyte_and_one_batch_when_the_size_is_unknown():
    assert chunk_size(None) == 1
    assert chunk_size(2**10) == 64 and chunk_size(2**18) == 4 and chunk_size(2**30) == 1
    assert [len(c) for c in chunked(iter(range(7)), 3)] == [3, 3, 1]


def _arrays(n):
    return (np.asarray([i]) for i in range(n))


def test_chunks_grow_from_one_batch_doubling_to_the_limit_and_count_the_batches_before_them():
    got = list(growing_chunks(_arrays(200), lambda: 64))
    assert [len(c) for _, c in got] == [1, 2, 4, 8, 16, 32, 64, 64, 9]
    assert [first for first, _ in got] == [0, 1, 3, 7, 15, 31, 63, 127, 191]
    assert [int(a[0]) for _, c in got for a in c] == list(range(200))  # every batch once, in order
    assert [len(c) for _, c in growing_chunks(_arrays(5), lambda: 1)] == [1] * 5
    assert list(growing_chunks(_arrays(0), lambda: 64)) == []


def test_the_limit_is_asked_again_before_each_chunk():
    asked = []

    def limit():
        asked.append(1)
        return 1 if len(asked) <= 4 else 8

    got = [len(c) for _, c in growing_chunks(_arrays(40), limit)]
    assert got == [1, 1, 1, 1, 2, 4, 8, 8, 8, 6]
    assert len(asked) == len(got) + 1  # and once more to find the batches used up


def test_pass_tasks_never_exceed_a_size_known_at_the_start_and_grow_once_one_is_learned():
    sizes = iter([2**18] + [2**10] * 100)  # 4 batches per chunk at the start, 64 later
    largest, tasks = pass_tasks(3, _arrays(30), lambda: next(sizes))
    got = list(tasks)
    assert largest == 4 and max(len(c) for _, _, c in got) == 4  # buffers sized for 4 hold every chunk
    assert [(e, first, len(c)) for e, first, c in got][:4] == [(3, 0, 1), (3, 1, 2), (3, 3, 4), (3, 7, 4)]
    learned = iter([None, None, None] + [2**10] * 100)  # unknown at the start, then learned
    largest, tasks = pass_tasks(0, _arrays(100), lambda: next(learned))
    assert largest == 1 and [len(c) for _, _, c in tasks] == [1, 1, 2, 4, 8, 16, 32, 36]


def test_each_batch_is_announced_once_in_order_a_full_chunk_before_the_task_holding_it():
    heard: list[int] = []
    largest, tasks = pass_tasks(0, _arrays(40), lambda: 2**18, lambda bs: heard.extend(int(b[0]) for b in bs))
    assert largest == 4 and heard == []  # nothing is announced before the first task is taken
    for _, first, chunk in tasks:
        end = first + len(chunk)  # the task goes in flight now: the 4 batches after it are known
        assert heard == list(range(min(40, end + largest))), (first, heard)
    assert heard == list(range(40))
