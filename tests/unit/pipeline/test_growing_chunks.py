"""The loader's chunks of batches grow (1, 2, 4, ... batches per read) and their numbers in errors and
states count the batches before them."""

from __future__ import annotations

import numpy as np

import stoker


class Rows(stoker.BatchSource):
    """Rows 0..n-1 as ``{"x": rows}``; its size of a batch is unknown until ``learn_after`` reads."""

    def __init__(self, n: int = 300, learn_after: int | None = 0, fail_at: int | None = None) -> None:
        self.n, self.learn_after, self.fail_at = n, learn_after, fail_at
        self.chunks: list[int] = []

    def __len__(self) -> int:
        return self.n

    def batch_bytes(self, batch_size: int) -> float | None:
        known = self.learn_after is not None and len(self.chunks) >= self.learn_after
        return 8.0 * batch_size if known else None

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
        self.chunks.append(len(chunk))
        if self.fail_at is not None and any(self.fail_at in c for c in chunk):
            raise KeyError(f"row {self.fail_at}")
        return [{"x": np.asarray(c, dtype=np.int64)} for c in chunk]


def _rows(loader: stoker.Loader) -> list[int]:
    return [int(v) for b in loader for v in b["x"]]


def test_chunks_grow_to_the_size_a_source_learns_during_the_pass_and_keep_the_order():
    source = Rows(learn_after=3)
    loader = stoker.Loader(source, batch_size=2, shuffle=True, num_workers=0)
    got = _rows(loader)
    assert sorted(got) == list(range(300))
    assert got == [int(v) for b in loader.batch_sampler.batches_from(0, 0) for v in b]  # the sampler's order
    assert source.chunks[:3] == [1, 1, 1]  # unknown size: one batch per read
    assert source.chunks[3:7] == [2, 4, 8, 16] and max(source.chunks) == 64  # then growing to the full chunk


def test_a_source_that_never_learns_its_size_reads_one_batch_at_a_time():
    source = Rows(learn_after=None)
    assert len(_rows(stoker.Loader(source, batch_size=4, num_workers=0))) == 300
    assert set(source.chunks) == {1}


def test_an_error_in_a_worker_process_names_the_batches_of_its_chunk_counted_from_the_pass_start(in_thread):
    # batch_size 1: chunks of 1, 2, 4, 8, 16 batches start at batches 0, 1, 3, 7, 15; row 20 is in 15-30
    loader = stoker.Loader(Rows(fail_at=20), batch_size=1, num_workers=2, engine="processes")
    err = in_thread(lambda: list(loader))
    assert isinstance(err, KeyError), err
    notes = "\n".join(getattr(err, "__notes__", []))
    assert "batches 15-30 of this pass (epoch 0)" in notes, notes


def test_a_resumed_pass_continues_after_the_saved_batches_whatever_the_chunks():
    loader = stoker.Loader(Rows(), batch_size=3, shuffle=True, num_workers=0)
    whole = [b["x"].tolist() for b in loader]
    loader.set_epoch(0)
    it = iter(loader)
    head = [next(it)["x"].tolist() for _ in range(11)]  # stops inside the fourth chunk (1 + 2 + 4 + 8)
    state = loader.state_dict()
    it.close()
    again = stoker.Loader(Rows(), batch_size=3, shuffle=True, num_workers=0)
    again.load_state_dict(state)
    assert head + [b["x"].tolist() for b in again] == whole
