"""The public surface of stoker.vision: a change to it is a decision, not an accident."""

from __future__ import annotations

import stoker
from stoker import vision

EXPECTED = {
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IMG_EXTENSIONS",
    "CenterCrop",
    "ColorJitter",
    "Compose",
    "CutMix",
    "ImageError",
    "ImageList",
    "ImageOptions",
    "ImageSource",
    "MixUp",
    "Normalize",
    "RandomCrop",
    "RandomErasing",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "Resize",
    "Skipped",
    "SplitClassesWarning",
    "decode",
    "eval_transforms",
    "find_images",
    "flat_folder",
    "from_dataset",
    "from_paths",
    "gpu_available",
    "image_folder",
    "probe",
    "train_transforms",
}


def test_vision_all_is_exactly_the_public_surface():
    assert set(vision.__all__) == EXPECTED
    for name in vision.__all__:
        assert getattr(vision, name) is not None


def test_convert_images_is_reachable_from_stoker_convert():
    assert "images" in stoker.convert.__all__ and callable(stoker.convert.images)
    assert isinstance(vision.ImageError("x"), stoker.StokerError)
