"""The readers an ImageSource chooses from (``vision/readers.py``) and their shared per-row error loop."""

from __future__ import annotations

import numpy as np
import pytest
from vision_images import bad_store

import stoker
from stoker.vision import CenterCrop, ImageError, ImageSource, RandomHorizontalFlip, train_transforms
from stoker.vision.readers import CpuDecode, FileBytes, GatherArrays, RenderArrays, RowErrors, StoreBytes


def test_each_input_gets_its_reader(folder, tmp_path):
    encoded = stoker.convert.images(folder, tmp_path / "enc").path
    resized = stoker.convert.images(folder, tmp_path / "res", "resized", size=20).path
    from_store = ImageSource(encoded, train_transforms(16)).reader
    from_files = ImageSource(folder, train_transforms(16)).reader
    assert isinstance(from_store, CpuDecode) and isinstance(from_store.encoded, StoreBytes)
    assert isinstance(from_files, CpuDecode) and isinstance(from_files.encoded, FileBytes)
    assert isinstance(ImageSource(resized).reader, GatherArrays)
    assert isinstance(ImageSource(resized, layout="NHWC").reader, RenderArrays)  # stored CHW: transposed per row
    assert isinstance(ImageSource(resized, [CenterCrop(10)]).reader, RenderArrays)
    assert isinstance(ImageSource(resized, [RandomHorizontalFlip()]).reader, RenderArrays)
    assert "reader=GatherArrays" in repr(ImageSource(resized))


def test_row_errors_name_the_row_or_record_it():
    def work(k, row):
        if row % 2:
            raise ImageError("odd rows are bad")

    idx = np.array([2, 3, 4, 5])
    with pytest.raises(ImageError, match=r"^item 3, row 3: odd rows are bad$") as info:
        RowErrors("raise", lambda row: f"item {row}").each_row(idx, work)
    assert info.value.row == 3 and info.value.path == "item 3"
    skip = RowErrors("skip", lambda row: f"item {row}")
    assert skip.each_row(idx, work).tolist() == [True, False, True, False]
    reasons = [(s.row, s.file, s.reason) for s in skip.report()]
    assert reasons == [(3, "item 3", "odd rows are bad"), (5, "item 5", "odd rows are bad")]


def test_row_errors_let_bugs_through():
    def work(k, row):
        raise KeyError("a bug, not a bad image")

    with pytest.raises(KeyError):
        RowErrors("skip", str).each_row(np.arange(3), work)


def test_cpu_and_gpu_paths_share_one_report(tmp_path):
    src = ImageSource(bad_store(tmp_path), train_transforms(16), on_error="skip")
    assert src.reader.errors is src.errors
    out = np.zeros((7, 3, 16, 16), np.uint8)
    batch, kept = src.reader.read_batch(np.arange(7), out)
    assert kept.tolist() == [0, 2, 6] and batch["image"].shape == (3, 3, 16, 16)
    assert [s.row for s in src.report()] == [1, 3, 4, 5]
