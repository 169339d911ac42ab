"""The one executor: the same results, in order, on threads, processes or inline; errors tagged."""

from __future__ import annotations

import os

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.pipeline.executor import Executor, chunk_size, chunked


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
    executor = Executor(_square_chunk, method, workers, depth=4)
    out = [b for chunk in executor.map(_chunks()) for b in chunk]
    assert [b["x"].tolist() for b in out] == [[i * i for i in range(j, j + 3)] for j in range(0, 30, 3)]
    pids = {int(b["pid"]) for b in out}
    assert (os.getpid() in pids) == (method == "threads" or workers == 0)
    assert executor.in_processes == (method == "processes" and workers > 0)


@pytest.mark.parametrize("method", ["threads", "processes"])
def test_a_worker_error_comes_back_as_itself_naming_the_stage(method):
    executor = Executor(_fail_on_seven, method, 2, depth=2, stage="read")
    with pytest.raises(KeyError, match="row 7") as info:
        list(executor.map(_chunks()))
    assert any("stage 'read'" in note for note in getattr(info.value, "__notes__", []))


def test_persistent_processes_serve_many_maps_until_closed():
    executor = Executor(_square_chunk, "processes", 2, depth=2, persistent=True)
    pids = [{int(b["pid"]) for chunk in executor.map(_chunks()) for b in chunk} for _ in range(2)]
    assert pids[0] == pids[1] and os.getpid() not in pids[0]
    executor.close()
    executor.close()  # idempotent


def test_an_unknown_method_is_refused():
    with pytest.raises(ConfigError, match="engine"):
        Executor(_square_chunk, "fibers", 2, depth=2)


def test_chunks_hold_about_a_mebibyte_and_one_batch_when_the_size_is_unknown():
    assert chunk_size(None) == 1
    assert chunk_size(2**10) == 64 and chunk_size(2**18) == 4 and chunk_size(2**30) == 1
    assert [len(c) for c in chunked(iter(range(7)), 3)] == [3, 3, 1]
