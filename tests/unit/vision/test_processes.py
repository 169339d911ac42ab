"""Image sources on the process engine: the same batches as on threads, rendered into shared memory,
and the rows a worker process skips reach the consumer's report."""

from __future__ import annotations

import os
import re

import pytest
import torch
from vision_images import bad_store, corrupt_files

import stoker
from stoker.vision import ImageSource, RandomHorizontalFlip, RandomResizedCrop, train_transforms


def _in_shared_memory(t: torch.Tensor) -> bool:
    ptr = t.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/dev/shm/stoker_"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= ptr < hi:
                    return True
    return False


@pytest.fixture
def encoded(folder, tmp_path):
    return stoker.convert.images(folder, tmp_path / "enc").path


@pytest.fixture
def resized(folder, tmp_path):
    return stoker.convert.images(folder, tmp_path / "small", size=32).path


@pytest.mark.parametrize("kind", ["folder", "encoded", "resized"])
def test_processes_give_the_batches_threads_give(kind, request, shm_clean):
    data = request.getfixturevalue(kind)
    out = {}
    for engine in ("threads", "processes"):
        src = ImageSource(data, [RandomResizedCrop(24), RandomHorizontalFlip()], seed=5)
        loader = stoker.Loader(src, batch_size=5, shuffle=True, num_workers=2, engine=engine)
        out[engine] = [(b["image"], b["label"]) for b in loader]
    assert len(out["threads"]) == len(out["processes"]) == 3
    for (image_t, label_t), (image_p, label_p) in zip(out["threads"], out["processes"]):
        assert torch.equal(image_t, image_p) and torch.equal(label_t, label_p)
    assert all(_in_shared_memory(image) for image, _ in out["processes"])  # rendered into a slot, not copied out


def test_rows_skipped_in_a_worker_process_are_reported(tmp_path, shm_clean):
    """Old code: each worker process kept its own record, and the consumer's report() was empty."""
    src = ImageSource(bad_store(tmp_path), train_transforms(16), on_error="skip")
    batches = list(stoker.Loader(src, batch_size=3, num_workers=2, timeout=60, engine="processes"))
    assert torch.cat([b["label"] for b in batches]).tolist() == [0, 2, 6]
    assert [s.row for s in src.report()] == [1, 3, 4, 5]
    assert all("row" in s.file and s.reason for s in src.report())


def test_a_worker_process_renders_into_its_slot_without_a_second_copy(folder):
    """The uint8 batch buffer a worker process fills is carved from the task's slot."""
    from stoker.pipeline.slots import SlotBuffers, SlotRing

    src = ImageSource(folder, train_transforms(16))
    buffers = SlotBuffers()
    src.use_buffers(buffers)
    ring = SlotRing(f"{os.getpid()}_vision", limit=1, size=1 << 20)
    slot = ring.take()
    assert slot is not None
    try:
        buffers.writer.begin((slot.name, slot.size))
        batch = src.read_batch(torch.arange(4).numpy())
        layout, overflow, _ = buffers.writer.place([batch["image"], batch["label"]], "unused")
        buffers.writer.end()
        assert overflow is None and layout[0][1] and layout[0][4] == 0  # in place, at the start of the slot
        assert torch.equal(
            torch.from_numpy(slot.base[: batch["image"].nbytes]), torch.from_numpy(batch["image"]).flatten()
        )
    finally:
        ring.close()


def _too_dark(x: torch.Tensor) -> torch.Tensor:
    raise ValueError(f"image too dark: mean {float(x.float().mean()):.1f}")


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_a_transform_that_raises_in_a_worker_keeps_its_type_with_the_row_and_stage(folder, engine, in_thread):
    """Old code: the error named the stage but not the row the transform failed on."""
    src = ImageSource(folder, [RandomResizedCrop(16), _too_dark])
    err = in_thread(lambda: list(stoker.Loader(src, batch_size=4, num_workers=2, engine=engine)))
    assert isinstance(err, ValueError) and "too dark" in str(err), err
    notes = "\n".join(err.__notes__)
    # every row raises; threads raise batch 0's error first, worker processes the first to arrive
    row = int(re.search(r"on row (\d+) ", notes).group(1)) if engine == "processes" else 0
    assert f"on row {row} ({src.describe(row)})" in notes and "stage 'read'" in notes, notes


def test_rows_skipped_in_a_subset_on_worker_processes_are_reported(folder, shm_clean):
    """Old code: Subset did not forward drain_report/merge_report, so the skip was lost in the worker."""
    files = corrupt_files(folder.parent)
    (folder / "ant" / "bad.jpg").write_bytes(files["corrupt"].read_bytes())  # sorted first: row 0
    src = ImageSource(folder, train_transforms(16), on_error="skip")
    sub = stoker.Subset(src, [0, 1, 2, 5, 9])
    batches = list(stoker.Loader(sub, batch_size=2, num_workers=2, timeout=60, engine="processes"))
    assert sum(len(b["label"]) for b in batches) == 4
    assert [s.row for s in sub.report()] == [0]
    assert "bad.jpg" in sub.report()[0].file


def test_per_row_image_work_defaults_to_processes_where_cores_allow(encoded, resized, folder, tmp_path, monkeypatch):
    """Decode and render take the GIL back several times per image: beside a Python training step,
    worker threads waited for it (docs/design-notes.md, vision). A plain gather stays on threads."""
    from stoker.pipeline import schedule

    monkeypatch.setattr(schedule, "usable_cores", lambda: 2)
    decoded = ImageSource(encoded, train_transforms(24))
    rendered = ImageSource(resized, [RandomResizedCrop(24)])
    square = stoker.convert.images(folder, tmp_path / "square", "resized", size=20).path
    gathered = ImageSource(square)  # rows stored at the batch's size: one gather
    engines = [stoker.Loader(s, batch_size=4).engine for s in (decoded, rendered, gathered)]
    assert engines == ["processes", "processes", "threads"]
    assert [s.costs(4).holds_gil for s in (decoded, rendered, gathered)] == [True, True, False]
    assert stoker.Loader(decoded, batch_size=4, num_workers=2).engine == "processes"
    assert stoker.Loader(decoded, batch_size=4, num_workers=2, engine="threads").engine == "threads"
    assert stoker.Loader(stoker.Subset(decoded, range(6)), batch_size=4).engine == "processes"
    monkeypatch.setattr(schedule, "usable_cores", lambda: 1)  # nothing could run beside the consumer
    assert stoker.Loader(decoded, batch_size=4).engine == "threads"
