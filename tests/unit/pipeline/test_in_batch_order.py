"""Rows inside a batch: the sampler's order by default (as a torch DataLoader gives them), storage order
on request; ``index`` names each row of a batch (issue 32)."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.work import Work

N = 300


@pytest.fixture
def store(tmp_path):
    # rows of 1 KiB and of 8 bytes, over several shards: both ways of gathering a shuffled batch
    x = np.arange(N, dtype=np.float32)[:, None] * np.ones(256, dtype=np.float32)
    cols = {"x": x, "y": np.arange(N, dtype=np.int64), "ids": [np.arange(i % 5, dtype=np.int32) for i in range(N)]}
    path = stoker.write(tmp_path / "s", cols, shard_size=40_000)
    assert len(stoker.open(path).manifest.shards) > 2
    return path


def test_store_batches_come_in_the_samplers_order(store):
    loader = stoker.Loader(store, batch_size=64, shuffle=True, seed=3, chunk_size=2)
    for rows, batch in zip(loader.batch_sampler.batches(0), loader):
        assert not np.array_equal(rows, np.sort(rows))
        assert batch["y"].tolist() == rows.tolist()
        assert batch["x"][:, -1].tolist() == rows.astype(np.float32).tolist()
        assert batch["ids_lengths"].tolist() == (rows % 5).tolist()


def test_store_gather_in_any_order_matches_a_sorted_gather(store):
    s = stoker.open(store)
    rows = np.random.default_rng(0).permutation(N)[:100]
    got = s.gather(rows, ["x", "y"])
    order = np.argsort(rows)
    ref = s.gather(rows[order], ["x", "y"])
    assert np.array_equal(got["x"][order], ref["x"]) and np.array_equal(got["y"][order], ref["y"])


def test_arrays_come_in_the_samplers_order():
    x = np.arange(N * 2).reshape(N, 2)
    loader = stoker.Loader(stoker.sources.Arrays(x, np.arange(N)), batch_size=32, shuffle=True, seed=1)
    for rows, (xb, yb) in zip(loader.batch_sampler.batches(0), loader):
        assert yb.tolist() == rows.tolist() and xb[:, 0].tolist() == (2 * rows).tolist()


def test_storage_order_on_request_and_the_index_of_each_row(store):
    loader = stoker.Loader(store, batch_size=16, shuffle=True, seed=3)
    rows = next(iter(loader.batch_sampler.batches(0)))
    for source in (loader.source, ArrayColumns({"y": np.arange(N)})):
        work = Work(source, None, loader.observers, None, in_batch_order="storage", with_index=True)
        (batch,) = work((0, 0, [rows]))
        assert batch["y"].tolist() == sorted(rows.tolist()) == batch["index"].tolist()
        (batch,) = Work(source, None, loader.observers, None, with_index=True)((0, 0, [rows]))
        assert batch["y"].tolist() == rows.tolist() == batch["index"].tolist()


def test_in_batch_order_is_checked():
    assert stoker.LoaderConfig().in_batch_order == "sampled"
    assert stoker.LoaderConfig(in_batch_order="storage").in_batch_order == "storage"
    with pytest.raises(ConfigError, match="in_batch_order"):
        stoker.LoaderConfig(in_batch_order="sorted")


def test_a_dataset_batch_gets_its_index_after_the_collate():
    import torch

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return N

        def __getitem__(self, i):
            return {"y": i}

    loader = stoker.Loader(Rows(), batch_size=8, shuffle=True, seed=2, num_workers=0)
    rows = next(iter(loader.batch_sampler.batches(0)))
    (batch,) = Work(loader.source, loader.source.collate, loader.observers, None, with_index=True)((0, 0, [rows]))
    assert np.asarray(batch["y"]).tolist() == rows.tolist() == batch["index"].tolist()


def test_the_loader_options_reach_the_batches(tmp_path):
    """in_batch_order and with_index through stoker.Loader itself, on threads, inline and processes."""
    stoker.write(tmp_path / "s", {"x": np.arange(64, dtype=np.int64) * 10})
    for workers, engine in ((0, "threads"), (2, "threads"), (2, "processes")):
        kw = {"batch_size": 16, "shuffle": True, "seed": 5, "num_workers": workers, "engine": engine}
        sampled = next(iter(stoker.Loader(tmp_path / "s", with_index=True, **kw)))
        assert sampled["x"].tolist() == (sampled["index"] * 10).tolist()
        assert sampled["index"].tolist() != sorted(sampled["index"].tolist())  # sampled, not storage, order
        stored = next(iter(stoker.Loader(tmp_path / "s", in_batch_order="storage", **kw)))
        assert stored["x"].tolist() == sorted(sampled["x"].tolist()) and "index" not in stored


@pytest.mark.parametrize("path", ["sorted then scattered", "one take across the shards", "row views"])
def test_a_shuffled_gather_is_in_the_samplers_order_on_every_path(tmp_path, monkeypatch, path):
    # shards of unequal sizes (the last is short, so its later columns start elsewhere), every shard's
    # first and last row, repeats; each way store/gather.py copies a shuffled batch, forced in turn
    from stoker.store import gather

    rng = np.random.default_rng(5)
    n = 250
    cols = {
        "y": np.arange(n, dtype=np.int64),
        "x": rng.integers(0, 255, (n, 1200), dtype=np.uint8),
        "z": rng.random((n, 3)).astype(np.float32),
        "s": [f"row {i}" for i in range(n)],
        "ids": [np.arange(i % 7, dtype=np.int32) + i for i in range(n)],
    }
    ds = stoker.open(stoker.write(tmp_path / "s", cols, shard_size=60_000))
    sizes = [s.rows for s in ds.manifest.shards]
    assert len(sizes) > 3 and len(set(sizes)) > 1
    starts = np.cumsum([0, *sizes])
    rows = np.concatenate([starts[:-1], starts[1:] - 1, rng.permutation(n)[:150], [0, n - 1]])
    rng.shuffle(rows)
    monkeypatch.setattr(gather, "MAX_PIECES", 1 << 20 if path == "one take across the shards" else 0)
    monkeypatch.setattr(gather, "VIEW_ROW_BYTES", 0 if path == "row views" else 1 << 40)
    got = ds.gather(rows)
    for name in ("y", "x", "z"):
        assert np.array_equal(got[name], cols[name][rows]), name
    assert got["s"] == [f"row {i}" for i in rows.tolist()]
    assert [got["ids"][k].tolist() for k in range(len(rows))] == [cols["ids"][i].tolist() for i in rows.tolist()]
