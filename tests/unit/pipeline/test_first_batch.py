"""The first batch first (issue 35): a rowwise source's first batch read in parts over the workers
and joined, the same batch as read whole; the first batches' rows told to ``readahead`` before their
reads, the first before any worker starts. No timings: ``benchmarks/peers/run.py`` times it."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import torch

import stoker
from stoker.pipeline.collate import join_rows
from stoker.pipeline.executor import MIN_PART_ROWS, first_parts, pass_tasks, peek


def _batches(n: int, size: int = 16) -> list[np.ndarray]:
    return [np.arange(i * size, (i + 1) * size) for i in range(n)]


def test_pass_tasks_read_the_first_batch_in_consecutive_parts_and_the_rest_as_before():
    _, whole = pass_tasks(2, _batches(6), lambda: 2**18)
    _, split = pass_tasks(2, _batches(6), lambda: 2**18, parts=3)
    whole, split = list(whole), list(split)
    assert [(e, f) for e, f, _ in split[:3]] == [(2, 0)] * 3
    assert np.concatenate([c[0] for _, _, c in split[:3]]).tolist() == list(range(16))
    assert all(len(c) == 1 and len(c[0]) >= 5 for _, _, c in split[:3])
    assert [(e, f, [b.tolist() for b in c]) for e, f, c in split[3:]] == [
        (e, f, [b.tolist() for b in c]) for e, f, c in whole[1:]
    ]


def test_first_parts_one_per_worker_of_enough_rows():
    assert first_parts(np.arange(256), 16) == 16
    assert first_parts(np.arange(20), 16) == 20 // MIN_PART_ROWS
    assert first_parts(np.arange(5), 4) == 1
    assert first_parts(None, 4) == 1
    assert peek([])[0] is None
    head, every = peek(iter(_batches(3)))
    assert head.tolist() == list(range(16)) and len(list(every)) == 3


def test_readahead_is_told_the_first_batch_at_once_and_each_chunk_of_the_window_as_it_goes_out():
    told: list[list[int]] = []
    _, tasks = pass_tasks(
        0, _batches(40), lambda: 2**18, readahead=lambda bs: told.append([int(b[0]) // 16 for b in bs]), window=2
    )
    assert told == [[0]]  # before any task is taken
    assert [f for _, f, _ in itertools.islice(tasks, 2)] == [0, 1] and told == [[0], [1, 2]]  # chunks of 1, 2, 4
    rest = [f for _, f, _ in tasks]
    assert rest == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39]
    assert told == [[0], [1, 2], [3, 4, 5, 6], [7, 8, 9, 10]]  # the chunks that start in the window (2 x 4 batches)


def test_join_rows_concatenates_tensors_arrays_and_file_lists():
    parts = [
        {
            "image": torch.full((2, 3), k, dtype=torch.uint8),
            "label": np.array([k, k]),
            "path": [f"{k}a", f"{k}b"],
            "pair": (torch.full((2,), k, dtype=torch.bfloat16),),
        }
        for k in range(3)
    ]
    joined = join_rows(parts)
    assert joined["image"][:, 0].tolist() == [0, 0, 1, 1, 2, 2]
    assert joined["label"].tolist() == [0, 0, 1, 1, 2, 2]
    assert joined["path"] == ["0a", "0b", "1a", "1b", "2a", "2b"]
    assert isinstance(joined["pair"], tuple) and joined["pair"][0].tolist() == [0, 0, 1, 1, 2, 2]
    assert joined["image"].dtype == torch.uint8 and joined["pair"][0].dtype == torch.bfloat16
    with pytest.raises(TypeError, match="cannot be joined"):
        join_rows([3, 4])


class Reads(stoker.BatchSource):
    """64 rows of ``x`` (rowwise), recording each read's rows and each readahead, in order."""

    rowwise = True

    def __init__(self) -> None:
        self.events: list[tuple[str, list[int]]] = []
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return 64

    def readahead(self, batches):
        with self.lock:
            self.events.append(("readahead", np.concatenate(batches).tolist()))

    def read(self, chunk):
        with self.lock:
            self.events.extend(("read", np.asarray(b).tolist()) for b in chunk)
        return [{"x": np.asarray(b, dtype=np.int64) * 10} for b in chunk]


def test_a_pass_reads_the_first_batch_in_parts_after_its_readahead():
    source = Reads()
    loader = stoker.Loader(source, batch_size=16, shuffle=True, num_workers=2, prefetch_factor=2, engine="threads")
    batches = [b["x"].tolist() for b in loader]
    order = [rows for rows in loader.batch_sampler.batches_from(0, 0)]
    assert batches == [(r * 10).tolist() for r in order]  # joined: the batch in the sampler's order
    assert source.events[0] == ("readahead", order[0].tolist())  # before any read
    reads = [rows for what, rows in source.events if what == "read"]
    assert sorted(len(r) for r in reads[:2]) == [8, 8] and sorted(reads[0] + reads[1]) == sorted(order[0].tolist())
    told = [rows for what, rows in source.events if what == "readahead"]
    assert told == [b.tolist() for b in order[:4]]  # the first window (2 workers x 2), each once


def test_a_source_that_is_not_rowwise_reads_its_first_batch_whole():
    source = Reads()
    source.rowwise = False
    list(stoker.Loader(source, batch_size=16, num_workers=2, engine="threads"))
    assert [len(rows) for what, rows in source.events if what == "read"] == [16] * 4
