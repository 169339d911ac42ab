"""stoker.Subset and torch subsets (random_split) of stores and batch sources, read batch-level."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import ConfigError
from stoker.pipeline.dataset_source import DatasetSource
from stoker.pipeline.schedule import Costs
from stoker.pipeline.store_source import StoreSource
from stoker.pipeline.subset import Subset, resolve_subset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vision"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources"))

from hdf5_files import make_h5  # noqa: E402
from vision_images import make_folder  # noqa: E402


@pytest.fixture
def store(tmp_path):
    cols = {
        "x": np.arange(40 * 3, dtype=np.float32).reshape(40, 3),
        "ids": [np.arange(i % 5 + 1, dtype=np.int32) for i in range(40)],
        "label": np.arange(40, dtype=np.int64),
    }
    return stoker.open(stoker.write(tmp_path / "s", cols, shard_size=256))


def _labels(loader, key="label"):
    return np.concatenate([b[key].numpy() for b in loader])


def test_random_split_of_a_store_keeps_the_batch_level_path(store):
    train, val = torch.utils.data.random_split(store, [30, 10], generator=torch.Generator().manual_seed(0))
    loader = stoker.Loader(train, batch_size=8)
    assert isinstance(loader.source, StoreSource)  # not a DatasetSource: one gather per chunk, no __getitem__
    assert not isinstance(loader.source, DatasetSource)
    np.testing.assert_array_equal(np.sort(_labels(loader)), np.sort(np.asarray(train.indices)))
    batch = next(iter(stoker.Loader(val, batch_size=10, columns=["ids"])))
    assert set(batch) == {"ids", "ids_lengths"}  # store options apply to a subset of a store


def test_nested_torch_subsets_compose(store):
    inner = torch.utils.data.Subset(store, list(range(10, 40)))
    outer = torch.utils.data.Subset(inner, [0, 5, 29])
    np.testing.assert_array_equal(_labels(stoker.Loader(outer, batch_size=3)), [10, 15, 39])


def test_stoker_subset_of_a_store_or_path(store):
    sub = stoker.Subset(store, [39, 2, 2, 7])
    assert len(sub) == 4
    assert isinstance(resolve_subset(sub), stoker.Store)
    np.testing.assert_array_equal(np.sort(_labels(stoker.Loader(sub, batch_size=4))), [2, 2, 7, 39])
    by_path = stoker.Subset(store.path, range(5))
    np.testing.assert_array_equal(_labels(stoker.Loader(by_path, batch_size=2)), [0, 1, 2, 3, 4])
    # read directly, as a BatchSource: the store's rows, padding included
    (batch,) = sub.read([np.array([0, 3])])
    np.testing.assert_array_equal(batch["label"], [39, 7])  # the rows in the order asked
    assert batch["ids"].shape == (2, 5)


def test_out_of_range_indices_name_the_first_bad_one(store):
    with pytest.raises(ConfigError, match=r"indices\[2\] = 40 is out of range.*0\.\.39"):
        stoker.Subset(store, [0, 1, 40, 41])
    with pytest.raises(ConfigError, match=r"indices\[0\] = -1"):
        stoker.Subset(store, [-1])
    with pytest.raises(ConfigError, match=r"indices\[0\] = 40"):
        stoker.Loader(torch.utils.data.Subset(store, [40]), batch_size=1)
    with pytest.raises(ConfigError, match="stoker.Store, its path or a stoker.BatchSource"):
        stoker.Subset([1, 2, 3], [0])


class Recording(stoker.BatchSource):
    """A source that records every hook the loader calls."""

    def __init__(self):
        self.calls: list[str] = []
        self.rows: list[list[int]] = []

    def __len__(self):
        return 20

    def read(self, chunk):
        self.rows.extend(sorted(int(i) for i in c) for c in chunk)
        return [{"i": np.asarray(c, dtype=np.int64)} for c in chunk]

    def collate(self, raw):
        self.calls.append("collate")
        return {"i": raw["i"] * 10}

    def batch_bytes(self, batch_size):
        return 123.0 * batch_size

    def costs(self, batch_size):
        return Costs(self.batch_bytes(batch_size), holds_gil=True, copies=True)

    def use_buffers(self, pool):
        self.calls.append("use_buffers")

    def set_epoch(self, epoch):
        self.calls.append(f"set_epoch {epoch}")

    def finalize(self, batch):
        self.calls.append("finalize")
        return batch

    def report(self):
        return "the report"


def test_every_hook_is_delegated():
    inner = Recording()
    sub = Subset(inner, [19, 3, 5, 7])
    assert sub.costs(2) == Costs(246.0, holds_gil=True, copies=True)
    assert Subset(stoker.sources.Arrays(np.arange(4)), [1]).costs(2) == Costs(16.0)
    assert sub.batch_bytes(2) == 246.0 and stoker.Loader(sub, batch_size=2).num_workers == 0
    assert sub.report() == "the report"
    loader = stoker.Loader(sub, batch_size=2, engine="threads", num_workers=0)
    batches = list(loader)
    assert inner.rows == [[3, 19], [5, 7]]  # rows remapped before the inner read
    np.testing.assert_array_equal(batches[0]["i"].numpy(), [190, 30])  # the inner collate ran
    assert inner.calls.count("collate") == 2 and inner.calls.count("finalize") == 2
    assert "use_buffers" in inner.calls and "set_epoch 0" in inner.calls
    assert loader.report() == "the report"


def test_torch_subset_of_a_batch_source_and_subset_of_subset():
    arrays = stoker.sources.Arrays(np.arange(30) * 2)
    loader = stoker.Loader(torch.utils.data.Subset(arrays, [4, 1]), batch_size=2)
    assert isinstance(loader.source, Subset)
    twice = Subset(Subset(arrays, range(10, 30)), [0, 19])
    assert twice.dataset is arrays
    np.testing.assert_array_equal(twice.indices, [10, 29])
    (batch,) = twice.read([np.array([0, 1])])
    np.testing.assert_array_equal(batch[0], [20, 58])


def test_image_source_accepts_the_same_selection(tmp_path):
    images = stoker.vision.ImageSource(make_folder(tmp_path), stoker.vision.eval_transforms(32))
    whole = next(iter(stoker.Loader(images, batch_size=len(images))))
    sub = next(iter(stoker.Loader(stoker.Subset(images, [11, 0, 6]), batch_size=3)))
    np.testing.assert_array_equal(sub["label"].numpy(), whole["label"].numpy()[[11, 0, 6]])
    np.testing.assert_array_equal(sub["image"].numpy(), whole["image"].numpy()[[11, 0, 6]])


def test_hdf5_accepts_the_same_selection(tmp_path):
    pytest.importorskip("h5py")
    h5 = stoker.sources.HDF5(make_h5(tmp_path), "data,labels")
    batch = next(iter(stoker.Loader(stoker.Subset(h5, [499, 10, 250]), batch_size=3)))
    np.testing.assert_array_equal(batch["labels"].numpy(), [499, 10, 250])
    split = torch.utils.data.random_split(h5, [0.5, 0.5], generator=torch.Generator().manual_seed(1))
    loader = stoker.Loader(split[1], batch_size=50)
    assert isinstance(loader.source, Subset)
    np.testing.assert_array_equal(np.sort(_labels(loader, "labels")), np.sort(np.asarray(split[1].indices)))
