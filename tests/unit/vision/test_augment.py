"""Transforms after the crop, through ImageSource and the Loader: where they run, what they do, seeds."""

from __future__ import annotations

import threading

import pytest
import torch

import stoker
from stoker.errors import ConfigError
from stoker.vision import (
    CenterCrop,
    ColorJitter,
    CutMix,
    ImageSource,
    MixUp,
    Normalize,
    RandomErasing,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
)
from stoker.vision.augment import CONSUMER, DEVICE, WORKERS

EVAL = [Resize(20), CenterCrop(16)]


@pytest.fixture
def encoded(folder, tmp_path):
    return stoker.convert.images(folder, tmp_path / "enc").path


def first(source, **kw) -> dict:
    return next(iter(stoker.Loader(source, batch_size=12, **kw)))


def test_an_arbitrary_callable_runs_per_sample_in_the_workers(encoded):
    seen: list[tuple] = []
    lock = threading.Lock()

    def invert(img: torch.Tensor) -> torch.Tensor:
        with lock:
            seen.append((tuple(img.shape), img.dtype, threading.current_thread() is threading.main_thread()))
        return 255 - img

    plain = first(ImageSource(encoded, EVAL))["image"]
    src = ImageSource(encoded, [*EVAL, invert])
    out = first(src, num_workers=2, engine="threads")["image"]  # threads: ``seen`` is this process's
    assert torch.equal(out, 255 - plain)
    assert seen == [((3, 16, 16), torch.uint8, False)] * 12  # one call per sample, in worker threads
    assert src.transform_plan()[-1] == f"invert -> {WORKERS}"


def test_a_callable_in_nhwc_batches_still_sees_chw(encoded):
    def darker(img: torch.Tensor) -> torch.Tensor:
        assert img.shape == (3, 16, 16)
        return img // 2

    plain = first(ImageSource(encoded, EVAL, layout="NHWC"))["image"]
    out = first(ImageSource(encoded, [*EVAL, darker], layout="NHWC"))["image"]
    assert out.shape == (12, 16, 16, 3) and torch.equal(out, plain // 2)


def test_the_plan_says_where_each_transform_runs(encoded):
    def after(img):
        return img

    src = ImageSource(
        encoded,
        [RandomResizedCrop(16), RandomHorizontalFlip(), ColorJitter(0.4), Normalize(), RandomErasing(), after],
    )
    assert src.transform_plan() == [
        "RandomResizedCrop -> workers, one planned crop",
        "RandomHorizontalFlip -> workers, one planned crop",
        f"ColorJitter -> {DEVICE}",
        f"Normalize -> {DEVICE}",
        f"RandomErasing -> {DEVICE}",
        f"after -> {CONSUMER}",
    ]
    assert "ColorJitter -> device" in repr(src)
    batch = first(src)
    assert batch["image"].shape == (12, 3, 16, 16) and batch["image"].dtype == torch.float32
    assert not [k for k in batch if k.startswith("_")]  # the random numbers do not reach the user


def test_brightness_one_is_the_identity_through_the_loader(encoded):
    plain = first(ImageSource(encoded, EVAL))["image"]
    same = first(ImageSource(encoded, [*EVAL, ColorJitter(brightness=(1.0, 1.0))]))["image"]
    half = first(ImageSource(encoded, [*EVAL, ColorJitter(brightness=(0.5, 0.5))]))["image"]
    assert same.dtype == torch.uint8 and torch.equal(same, plain)
    assert torch.equal(half, (plain.float() * 0.5).round().to(torch.uint8))


def test_erasing_after_normalize_writes_in_normalized_values(encoded):
    src = ImageSource(encoded, [*EVAL, Normalize(), RandomErasing(p=1.0, value=0.0)])
    ref = first(ImageSource(encoded, [*EVAL, Normalize()]))["image"]
    out = first(src)["image"]
    changed = out != ref
    assert changed.any() and (out[changed] == 0).all()
    assert all(changed[k].any() for k in range(12))  # p=1: each image has its box


def test_device_ops_are_the_same_for_a_seed_and_differ_across_epochs(encoded):
    ops = [RandomResizedCrop(16), ColorJitter(0.4, 0.4, 0.4, 0.1), RandomErasing(p=0.5)]

    def epochs(seed: int, workers: int) -> list[torch.Tensor]:
        loader = stoker.Loader(ImageSource(encoded, ops, seed=seed), batch_size=5, num_workers=workers)
        return [torch.cat([b["image"] for b in loader]) for _ in range(2)]

    a, b, c = epochs(3, 0), epochs(3, 2), epochs(4, 0)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])  # any worker count
    assert not torch.equal(a[0], a[1])  # a new epoch draws again
    assert not torch.equal(a[0], c[0])  # another seed


def test_mixup_soft_labels_through_the_loader(encoded):
    src = ImageSource(encoded, [*EVAL, MixUp(alpha=1.0, num_classes=3)])
    plain = first(ImageSource(encoded, EVAL))
    batch = first(src)
    labels = batch["label"]
    assert labels.shape == (12, 3) and labels.dtype == torch.float32
    assert torch.allclose(labels.sum(1), torch.ones(12))
    assert plain["label"][0] == 0 and plain["label"][-1] == 2  # row 0 is mixed with the last row
    lam = float(labels[0, 0])
    assert 0 < lam < 1 and labels[0, 2] == pytest.approx(1 - lam)
    x = plain["image"].float()
    ref = (lam * x + (1 - lam) * x.roll(1, 0)).round().clamp(0, 255).to(torch.uint8)
    assert (batch["image"].int() - ref.int()).abs().max() <= 1  # one lambda for the images and the labels


def test_mixing_needs_labels_and_a_big_enough_num_classes(encoded, folder, tmp_path):
    unlabeled = sorted(folder.rglob("*.jpg"))
    with pytest.raises(ConfigError, match="MixUp mixes labels"):
        ImageSource(unlabeled, [*EVAL, MixUp(num_classes=3)])
    src = ImageSource(encoded, [*EVAL, CutMix(num_classes=2)])
    with pytest.raises(ConfigError, match=r"num_classes=2\) got label 2"):
        list(stoker.Loader(src, batch_size=12))


def test_invalid_transforms_are_errors_naming_them(encoded):
    with pytest.raises(ConfigError, match="42 is not callable"):
        ImageSource(encoded, [*EVAL, 42])
    with pytest.raises(ConfigError, match="comes after ColorJitter"):
        ImageSource(encoded, [CenterCrop(16), ColorJitter(0.2), RandomHorizontalFlip()])
    with pytest.raises(ConfigError, match="before Normalize"):
        ImageSource(encoded, [*EVAL, Normalize(), ColorJitter(0.2)])

    class ToTensor:  # what torchvision's looks like to stoker
        def __call__(self, img):
            return img

    with pytest.raises(ConfigError, match="ToTensor"):
        ImageSource(encoded, [*EVAL, ToTensor()])


def test_a_callable_that_changes_the_size_is_an_error_naming_it(encoded):
    def shrink(img):
        return img[:, :8]

    with pytest.raises(ConfigError, match="shrink returned a torch.uint8 tensor of shape"):
        first(ImageSource(encoded, [*EVAL, shrink]))


def test_batch_ops_give_the_same_batches_from_worker_processes(encoded):
    ops = [RandomResizedCrop(16), ColorJitter(0.4, 0.4, 0.4, 0.1), Normalize(), RandomErasing(), CutMix(num_classes=3)]
    here = list(stoker.Loader(ImageSource(encoded, ops), batch_size=5, num_workers=0))
    procs = list(stoker.Loader(ImageSource(encoded, ops), batch_size=5, num_workers=2, engine="processes"))
    assert len(here) == len(procs) == 3
    for a, b in zip(here, procs):
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["label"], b["label"])
        assert sorted(b) == ["image", "label"]


def test_the_loaders_seed_drives_the_augmentation_unless_the_source_has_its_own(encoded):
    """One seed decides order and draws: ImageSource(seed=None) follows Loader(seed=); Loader(seed=1)
    and Loader(seed=2) drew the same crops before (ImageSource's seed defaulted to 0)."""
    ops = [RandomResizedCrop(16), ColorJitter(0.4, 0.4, 0.4, 0.1)]

    def images(loader_seed: int, source_seed: int | None = None, workers: int = 0) -> torch.Tensor:
        src = ImageSource(encoded, ops, seed=source_seed)
        return torch.cat([b["image"] for b in stoker.Loader(src, batch_size=5, seed=loader_seed, num_workers=workers)])

    one, two = images(1), images(2)
    assert not torch.equal(one, two)  # another loader seed, other draws
    assert torch.equal(one, images(1, workers=2))  # the same seed: the same draws, any workers
    assert torch.equal(images(1, source_seed=7), images(2, source_seed=7))  # a source's own seed wins
    assert torch.equal(images(7), images(3, source_seed=7))  # ...and means what the loader's would
