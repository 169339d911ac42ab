"""An image loader's first batch, read in parts over the workers (issue 35), is the batch read whole,
on threads and processes, and a resumed pass continues exactly; batch ops keep it whole."""

from __future__ import annotations

import pytest
import torch

import stoker
from stoker.vision import ImageSource, MixUp, RandomHorizontalFlip, RandomResizedCrop, train_transforms


@pytest.fixture
def store(folder, tmp_path):
    files = sorted(str(p) for p in folder.rglob("*.jpg")) * 3  # 36 rows: batches of 16 split in 2 parts of 8
    return stoker.convert.images(files, tmp_path / "enc", labels=list(range(36))).path


def _loader(store, **kw):
    src = ImageSource(store, [RandomResizedCrop(24), RandomHorizontalFlip()])
    return stoker.Loader(src, batch_size=16, shuffle=True, seed=11, **kw)


def _same(a, b) -> bool:
    return all(torch.equal(x["image"], y["image"]) and torch.equal(x["label"], y["label"]) for x, y in zip(a, b))


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_the_first_batch_read_in_parts_is_the_batch_read_whole(store, engine, shm_clean):
    whole = list(_loader(store, num_workers=0))
    loader = _loader(store, num_workers=2, engine=engine, timeout=60)
    assert loader.source.rowwise
    parts = list(loader)
    assert len(parts) == len(whole) == 3 and _same(parts, whole)
    again = _loader(store, num_workers=0)
    again.set_epoch(1)
    assert _same(list(loader), list(again))  # the next pass (epoch 1) too


def test_a_resumed_pass_reads_its_first_batch_in_parts_and_continues_exactly(store, shm_clean):
    full = list(_loader(store, num_workers=0))
    first = _loader(store, num_workers=2, engine="processes", timeout=60)
    it = iter(first)
    next(it)
    state = first.state_dict()
    del it
    resumed = _loader(store, num_workers=2, engine="processes", timeout=60)
    resumed.load_state_dict(state)
    assert _same(list(resumed), full[1:])


def test_batch_ops_keep_the_first_batch_whole(store):
    assert not ImageSource(store, [RandomResizedCrop(24), MixUp(num_classes=36)]).rowwise
    assert ImageSource(store, train_transforms(24)).rowwise
