"""The nvJPEG reader (``vision/gpu.py``): its host half runs anywhere, the whole path needs CUDA (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from vision_images import bad_store, photo, save

import stoker
from stoker.errors import ConfigError
from stoker.vision import ImageError, ImageSource, eval_transforms, train_transforms
from stoker.vision.decode import probe
from stoker.vision.gpu import GpuDecode
from stoker.vision.readers import FileBytes, StoreBytes


@pytest.fixture
def encoded(folder, tmp_path):
    return stoker.convert.images(folder, tmp_path / "enc").path


def host_half(src: ImageSource) -> GpuDecode:
    """The GPU reader over a CPU source's rows, randomness and error log (no CUDA needed to plan)."""
    rows = StoreBytes(src.store, src.image_column) if src.store is not None else FileBytes(src.images)
    return GpuDecode(rows, src.options, src.size, src.rng, src.errors)


def test_gpu_reader_plans_on_the_host(encoded, tmp_path):
    gpu = host_half(ImageSource(encoded, train_transforms(16)))
    batch, kept = gpu.read_batch(np.arange(12))
    assert len(batch["jpeg"]) == len(batch["plan"]) == 12 and kept.tolist() == list(range(12))
    for blob, (top, bottom, left, right, flip) in zip(batch["jpeg"], batch["plan"]):
        info = probe(blob)
        assert 0 <= top < bottom <= info.height and 0 <= left < right <= info.width and isinstance(flip, bool)
    save(tmp_path / "png" / "a.png", photo(20, 20))
    with pytest.raises(ImageError, match="a.png.*JPEG only"):
        host_half(ImageSource(tmp_path / "png", train_transforms(16))).read_batch(np.arange(1))


def test_gpu_reader_lists_skipped_rows_in_the_source_report(tmp_path):
    """Rows skipped by the GPU path's host half show in report(), as on the CPU path."""
    src = ImageSource(bad_store(tmp_path), train_transforms(16), on_error="skip")
    batch, kept = host_half(src).read_batch(np.arange(7))
    assert kept.tolist() == [0, 2, 6] and len(batch["jpeg"]) == len(batch["plan"]) == 3
    assert [s.row for s in src.report()] == [1, 3, 4, 5]
    assert all("row" in s.file and s.reason for s in src.report())


def test_gpu_decoding_is_refused_cleanly_without_cuda(encoded):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ConfigError, match="decode_device"):
        ImageSource(encoded, train_transforms(8), decode_device="cuda")


@pytest.mark.gpu
def test_gpu_decoding_matches_the_cpu_path(encoded):
    cpu = ImageSource(encoded, eval_transforms(16))
    gpu = ImageSource(encoded, eval_transforms(16), decode_device="cuda")
    assert isinstance(gpu.reader, GpuDecode)
    a = next(iter(stoker.Loader(cpu, batch_size=12, device="cuda")))
    b = next(iter(stoker.Loader(gpu, batch_size=12, device="cuda")))
    assert b["image"].is_cuda and b["image"].shape == a["image"].shape
    assert (a["image"] - b["image"]).abs().mean() < 0.1


@pytest.mark.gpu
def test_gpu_decoding_skips_and_reports_bad_rows(tmp_path):
    src = ImageSource(bad_store(tmp_path), train_transforms(16), on_error="skip", decode_device="cuda")
    batches = list(stoker.Loader(src, batch_size=3, device="cuda", num_workers=2, timeout=60))
    assert torch.cat([b["label"] for b in batches]).tolist() == [0, 2, 6]
    assert all(b["image"].is_cuda and tuple(b["image"].shape[1:]) == (3, 16, 16) for b in batches)
    assert [s.row for s in src.report()] == [1, 3, 4, 5]
