"""Shared-memory batch slots: batches handed out with no copy, never overwritten while referenced."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import stoker
from stoker.pipeline.processes import ProcessPool
from stoker.pipeline.slots import SlotBuffers, SlotPlan, SlotRing, SlotWriter


class Rows(torch.utils.data.Dataset):
    def __init__(self, n: int = 600, width: int = 2_000) -> None:
        self.n, self.width = n, width

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        return {"x": np.full(self.width, i, dtype=np.float32), "name": f"row {i}"}


def _in_shared_memory(t: torch.Tensor) -> bool:
    """Whether ``t``'s memory lies in a mapping of a stoker file in /dev/shm (not memory of its own)."""
    ptr = t.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/dev/shm/stoker_"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= ptr < hi:
                    return True
    return False


def _mine() -> list[str]:
    return [f for f in os.listdir("/dev/shm") if f.startswith(f"stoker_{os.getpid()}_")]


def test_dataset_batches_are_views_of_shared_memory_not_copies(shm_clean):
    """Old code: the consumer copied every array out of /dev/shm into a fresh batch."""
    batches = list(stoker.Loader(Rows(64), batch_size=8, num_workers=2, engine="processes"))
    assert all(_in_shared_memory(b["x"]) for b in batches)
    assert [b["name"] for b in batches][1] == [f"row {i}" for i in range(8, 16)]  # objects still travel


def test_batches_kept_alive_across_many_steps_never_change(shm_clean):
    """Keep every third batch for the whole epoch (and some across epochs) while slots recycle under them."""
    loader = stoker.Loader(Rows(), batch_size=4, num_workers=2, prefetch_factor=2, engine="processes")
    kept: dict[tuple[int, int], torch.Tensor] = {}
    for epoch in range(2):
        for k, batch in enumerate(loader):
            if k % 3 == 0:
                kept[(epoch, k)] = batch["x"]
            for (_, j), x in list(kept.items())[-5:]:  # check some old ones at every step
                assert torch.equal(x[:, 0], torch.arange(j * 4, j * 4 + 4, dtype=torch.float32))
    assert len(kept) == 2 * 50
    for (_, j), x in kept.items():
        assert bool((x == torch.arange(j * 4, j * 4 + 4, dtype=torch.float32)[:, None]).all()), j
    assert all(_in_shared_memory(x) for x in kept.values())
    del kept


def _batch(i: int) -> dict:
    return {"x": np.full(50_000, i, dtype=np.int64)}


def test_slots_are_reused_once_batches_are_dropped_and_not_before():
    pool = ProcessPool(_batch, 2, "test")
    try:
        for k, out in enumerate(pool.map(range(60), depth=4)):
            assert int(out["x"][0]) == k
        ring = pool._ring
        assert ring is not None and ring.size is not None
        made = ring._count
        assert 0 < made <= ring.limit  # 60 batches through a bounded ring
        held = list(pool.map(range(40), depth=4))  # the user keeps every batch: new slots, then overflow
        assert [int(h["x"][-1]) for h in held] == list(range(40))
        assert ring._count <= ring.limit
    finally:
        pool.close()
    assert [int(h["x"][0]) for h in held] == list(range(40))  # still readable after close
    assert not _mine()


def test_a_worker_buffer_carved_from_the_slot_is_sent_in_place(shm_clean):
    """A source filling SlotBuffers arrays writes its batch straight into the slot: no copy in the worker."""
    ring = SlotRing(f"{os.getpid()}_test", limit=2, size=1 << 16)
    writer = SlotWriter()
    buffers = SlotBuffers(writer)
    slot = ring.take()
    assert slot is not None
    try:
        writer.begin((slot.name, slot.size))
        image = buffers.get("image", (4, 3, 8, 8), np.uint8)
        image[...] = 7
        label = np.arange(4)  # made elsewhere: copied into the slot
        layout, overflow, needed = writer.place([image, label], "unused")
        writer.end()
        assert overflow is None and layout[0][1] and layout[1][1]
        assert layout[0][4] == 0 and layout[1][4] >= image.nbytes  # the image where it was carved
        assert needed >= image.nbytes + label.nbytes
        assert bool((slot.base[: image.nbytes] == 7).all())
        outside = buffers.get("image", (2, 2), np.uint8)  # no task running: an ordinary buffer
        assert not np.shares_memory(outside, slot.base)
    finally:
        ring.close()


def test_a_result_larger_than_its_slot_comes_whole_through_an_overflow_segment(shm_clean):
    ring = SlotRing(f"{os.getpid()}_test", limit=2, size=4096)
    writer = SlotWriter()
    slot = ring.take()
    assert slot is not None
    try:
        writer.begin((slot.name, slot.size))
        big = np.arange(10_000, dtype=np.int64)
        layout, overflow, needed = writer.place([big, "meta"], f"stoker_{os.getpid()}_test_1_1")
        writer.end()
        assert overflow is not None and not layout[0][1] and layout[1] == ("object", "meta")
        from stoker.pipeline.slots import read_result

        out = read_result(layout, ("list", [("leaf", 0), ("leaf", 1)]), slot, overflow)
        assert np.array_equal(out[0], big) and out[1] == "meta"
        ring.learn(needed)
        assert ring.size is not None and ring.size >= big.nbytes  # later slots are big enough
    finally:
        ring.close()


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_a_slot_plan_with_pin_does_nothing_without_cuda(engine, shm_clean):
    """The CUDA page-locking path is skipped (not faked) where torch sees no CUDA."""
    if torch.cuda.is_available():
        pytest.skip("checks the path without CUDA")
    ring = SlotPlan(pin=True, size=4096).ring(f"{os.getpid()}_pin")
    slot = ring.take()
    assert slot is not None and slot.pinned is False
    ring.close()


def _torch_threads(_: int) -> dict:
    return {"threads": np.asarray(torch.get_num_threads())}


def test_worker_processes_run_torch_on_one_thread_each():
    """Each worker process resampling with torch's whole thread team oversubscribes the cores."""
    pool = ProcessPool(_torch_threads, 2, "test")
    try:
        assert {int(r["threads"]) for r in pool.map(range(4), depth=2)} == {1}
    finally:
        pool.close()


class Pairs(torch.utils.data.Dataset):
    """Samples mixing arrays, tensors, ints and strings, as users write them."""

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> dict:
        return {"x": np.full((2, 3), i, np.float32), "t": torch.full((4,), i), "i": i, "s": f"r{i}", "l": [i, -i]}


def test_the_dataset_path_collates_straight_into_the_slot_and_like_default_collate(shm_clean):
    from stoker.device.buffers import BufferPool
    from stoker.pipeline.collate import default_collate
    from stoker.pipeline.dataset_source import collate_into

    samples = [Pairs()[i] for i in range(4)]
    want, got = default_collate(samples), collate_into(samples, BufferPool())
    assert want.keys() == got.keys() and want["s"] == got["s"]
    for key in ("x", "t", "i"):
        assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key])
    assert all(np.array_equal(g, w) for g, w in zip(got["l"], want["l"]))

    ring = SlotRing(f"{os.getpid()}_collate", limit=1, size=1 << 16)
    writer = SlotWriter()
    slot = ring.take()
    assert slot is not None
    try:
        writer.begin((slot.name, slot.size))
        batch = collate_into(samples, SlotBuffers(writer))
        cursor = writer._cursor
        layout, overflow, _ = writer.place([batch["x"], batch["t"]], "unused")
        writer.end()
        assert overflow is None and writer._cursor == cursor  # stacked in the slot: placed without a copy
        assert layout[0][4] == 0 and np.array_equal(batch["x"], want["x"])
    finally:
        ring.close()
