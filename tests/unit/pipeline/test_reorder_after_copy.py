"""Sampled order at the price of storage order where a GPU takes the batch: the workers gather each
batch's rows sorted (one take per shard) and the copy puts them back in the sampler's order
(``Transfer.start(batch, order)``, ``index_select`` on the device). Exercised here on the CPU
through ``transfer.reorders`` (True on CUDA); ``tests/gpu/test_cuda.py`` runs it on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import stoker
from stoker.device.transfer import Transfer, reorder
from stoker.errors import ConfigError
from stoker.pipeline.store_source import StoreSource
from stoker.pipeline.work import REORDER, Reordered, Work, begin_copy, finish_copy, read_order, storage_order


def test_storage_order_and_back_give_the_rows_again():
    rng = np.random.default_rng(0)
    for rows in (rng.permutation(50), rng.integers(0, 10, size=40), np.array([3, 1, 2, 1])):
        ordered, back = storage_order(rows)
        assert (np.diff(ordered) >= 0).all() and ordered[back].tolist() == rows.tolist()
    assert storage_order(np.arange(5))[1] is None and storage_order(np.array([4]))[1] is None


def test_reorder_takes_every_value_in_order_and_refuses_a_value_of_other_rows():
    order = np.array([2, 0, 1])
    values = {"x": torch.arange(6).reshape(3, 2), "s": ["a", "b", "c"], "b": (b"0", b"1", b"2"), "k": 7}
    got = reorder(values, order)
    assert got["x"].tolist() == [[4, 5], [0, 1], [2, 3]]
    assert got["s"] == ["c", "a", "b"] and got["b"] == (b"2", b"0", b"1") and got["k"] == 7
    with pytest.raises(ConfigError, match="'y' has 2 rows for a batch of 3.*in_batch_order='storage'"):
        reorder({"y": torch.zeros(2)}, order)


class Recorded(StoreSource):
    """A store source that keeps the rows of each read (to see that the workers read sorted rows)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = []

    def read(self, chunk):
        self.reads.extend(np.asarray(rows).tolist() for rows in chunk)
        return super().read(chunk)


def test_work_reads_sorted_rows_and_the_copy_puts_them_back(mixed_store):
    source = Recorded(stoker.open(mixed_store))
    transfer = Transfer("cpu")
    assert read_order("sampled", True, source, None, 8) == REORDER
    assert read_order("sampled", False, source, None, 8) == read_order("sampled", True, source, len, 8) == "sampled"
    assert read_order("storage", True, source, None, 8) == "storage"
    rows = [np.array([250, 3, 120, 3, 299, 0]), np.array([7, 8, 9])]
    work = Work(source, None, stoker.Loader(mixed_store).observers, None, in_batch_order=REORDER, with_index=True)
    first, second = work((0, 0, rows))
    assert source.reads == [sorted(r.tolist()) for r in rows]
    assert isinstance(first, Reordered) and not isinstance(second, Reordered)  # already sorted: nothing to undo
    batch = finish_copy(transfer, begin_copy(transfer, first))
    assert batch["label"].tolist() == batch["index"].tolist() == rows[0].tolist()
    assert batch["text"] == [f"row {i} é" for i in rows[0]]
    assert batch["ids_lengths"].tolist() == [len(source.store[int(i)]["ids"]) for i in rows[0]]


@pytest.mark.parametrize(("workers", "engine"), [(0, "threads"), (2, "threads"), (2, "processes")])
def test_a_loader_that_reorders_after_the_copy_hands_out_the_samplers_order(mixed_store, workers, engine):
    loader = stoker.Loader(
        mixed_store, batch_size=32, shuffle=True, seed=4, num_workers=workers, engine=engine, chunk_size=2
    )
    loader.transfer.reorders = True  # what a CUDA transfer says
    store = stoker.open(mixed_store)
    for rows, batch in zip(loader.batch_sampler.batches(0), loader, strict=True):
        assert batch["label"].tolist() == rows.tolist()
        assert batch["text"] == [f"row {i} é" for i in rows]
        want = store.gather(rows, ["image", "blob"])
        assert np.array_equal(batch["image"].numpy(), want["image"]) and batch["blob"] == want["blob"]


def test_a_text_store_reordered_after_the_copy_gives_the_same_batches(tmp_path):
    import stoker.convert
    import stoker.text

    texts = {
        "text": [("word " * (i % 17 + 1)).strip() + f" n{i}" for i in range(200)],
        "label": [i % 7 for i in range(200)],
    }
    store = str(stoker.convert.text(texts, tmp_path / "s", max_length=40).path)

    def batches(reorders):
        loader = stoker.text.Loader(store, batch_size=16, shuffle=True, seed=2, bucketing=False, with_index=True)
        loader.transfer.reorders = reorders
        assert reorders is False or loader.source.costs(16).copies  # so the loader does read sorted rows
        return [(b["index"].tolist(), b["input_ids"].tolist(), b["labels"].tolist()) for b in loader]

    got = batches(True)
    assert got == batches(False) and any(rows != sorted(rows) for rows, _, _ in got)
