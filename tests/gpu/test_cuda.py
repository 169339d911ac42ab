"""The CUDA path: pinned staging, side-stream copies, held batches never overwritten.

Marked ``gpu``: skipped where torch sees no CUDA device (CI has none).
"""

import numpy as np
import pytest
import torch

import stoker

pytestmark = pytest.mark.gpu


def test_batches_land_on_the_device(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=32, device="cuda", num_workers=2)
    assert loader.transfer.pin_memory
    for batch in loader:
        assert batch["image"].is_cuda and batch["label"].is_cuda and batch["ids"].is_cuda
        assert isinstance(batch["text"], list)


def test_device_batches_match_the_store(mixed_store):
    ds = stoker.open(mixed_store)
    loader = stoker.Loader(ds, batch_size=50, shuffle=True, device="cuda", num_workers=2)
    kept = [b for b in loader] + [b for b in loader]  # hold every batch across two epochs
    torch.cuda.synchronize()
    for b in kept:
        labels = b["label"].cpu().numpy()
        np.testing.assert_array_equal(b["image"].cpu().numpy(), ds.gather(labels, ["image"])["image"])


def test_staging_buffers_are_pinned_and_recycled(mixed_store):
    loader = stoker.Loader(mixed_store, batch_size=100, columns=["image"], device="cuda", num_workers=1)
    for _ in range(3):
        for _ in loader:
            pass
    buffers = [b for bufs in loader.transfer.pool._free.values() for b in bufs]
    assert buffers and len(buffers) <= 6
    assert all(torch.from_numpy(b).is_pinned() for b in buffers)


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_rows_are_read_sorted_and_put_back_in_the_samplers_order_on_the_device(mixed_store, engine):
    loader = stoker.Loader(
        mixed_store, batch_size=40, shuffle=True, seed=9, device="cuda", num_workers=2, engine=engine
    )
    assert loader.transfer.reorders  # the workers gather in storage order; index_select after the copy
    ds = stoker.open(mixed_store)
    for rows, batch in zip(loader.batch_sampler.batches(0), loader, strict=True):
        assert batch["label"].is_cuda and batch["label"].cpu().tolist() == rows.tolist()
        assert batch["text"] == [f"row {i} é" for i in rows]
        np.testing.assert_array_equal(batch["image"].cpu().numpy(), ds.gather(rows, ["image"])["image"])
