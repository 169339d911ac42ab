"""The loader's ``chunk_size``: batches per worker task, which changes how batches are read, never which."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError
from stoker.pipeline.executor import pass_tasks

SIZES = [1, 3, 64, None]


class _Counted(stoker.BatchSource):
    """Rows 0..n-1; each batch carries its rows and the number of batches of the read that made it."""

    def __init__(self, n: int = 60) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def batch_bytes(self, batch_size: int) -> float:
        return 16.0 * batch_size  # small batches: chunk_size=None means 64 batches per task

    def read(self, chunk):
        return [{"x": np.asarray(idx, np.int64), "per_task": np.full(len(idx), len(chunk), np.int64)} for idx in chunk]


def _rows(loader) -> list[list[int]]:
    return [b["x"].tolist() for b in loader]


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_same_batches_with_any_chunk_size(mixed_store, engine):
    def batches(size):
        loader = stoker.Loader(
            mixed_store, batch_size=7, shuffle=True, seed=3, num_workers=2, engine=engine, chunk_size=size
        )
        return [[b["label"].tolist() for b in loader] for _ in range(2)]  # two epochs

    expected = batches(None)
    assert sorted(r for batch in expected[0] for r in batch) == list(range(300))
    for size in SIZES[:-1]:
        assert batches(size) == expected, size


def test_state_saved_under_one_chunk_size_resumes_under_another(mixed_store):
    def loader(size):
        return stoker.Loader(mixed_store, batch_size=7, shuffle=True, seed=5, num_workers=2, chunk_size=size)

    whole = [b["label"].tolist() for b in loader(None)]
    first = loader(1)
    it = iter(first)
    head = [next(it)["label"].tolist() for _ in range(10)]
    state = first.state_dict()
    it.close()
    later = loader(64)
    later.load_state_dict(state)
    assert head + [b["label"].tolist() for b in later] == whole


@pytest.mark.parametrize("engine", ["threads", "processes"])
@pytest.mark.parametrize("size", SIZES)
def test_chunk_size_bounds_the_batches_each_task_reads(size, engine):
    loader = stoker.Loader(_Counted(), batch_size=2, num_workers=1, engine=engine, chunk_size=size)
    per_task = [int(b["per_task"][0]) for b in loader]
    assert len(per_task) == 30
    # tasks of 1, 2, 4, ... batches up to the bound, the last one maybe shorter
    tasks, i = [], 0
    while i < len(per_task):
        tasks.append(per_task[i])
        i += per_task[i]
    bound = 64 if size is None else size
    expect, grow, left = [], 1, 30
    while left:
        expect.append(min(grow, bound, left))
        left -= expect[-1]
        grow = 2 * min(grow, bound)
    assert tasks == expect


def test_pass_tasks_reports_the_chunk_size_as_the_largest_chunk():
    batches = [np.arange(i, i + 1) for i in range(20)]
    largest, tasks = pass_tasks(0, batches, lambda: 1.0, most=5)
    assert largest == 5
    assert [len(chunk) for _, _, chunk in tasks] == [1, 2, 4, 5, 5, 3]
    largest, _ = pass_tasks(0, batches, lambda: 1.0)
    assert largest == 64


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "4"])
def test_invalid_chunk_size_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="chunk_size") as err:
        stoker.Loader(_Counted(), batch_size=2, chunk_size=bad)
    assert err.value.option == "chunk_size"
