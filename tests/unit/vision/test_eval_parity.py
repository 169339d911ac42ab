"""Eval pixels are torchvision's: ``eval_transforms`` against PIL's Resize + CenterCrop, on real photos.

torchvision's ``Resize`` on a PIL image calls ``img.resize((w, h), Image.BILINEAR)`` (antialiased, no
``reducing_gap``) on the whole image, and ``CenterCrop`` cuts ``round((h - ch) / 2)`` rows and columns off;
the reference below does exactly that, with PIL alone (torchvision does not import beside a CPU torch build).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker.vision import ImageSource, eval_transforms, train_transforms
from stoker.vision.options import ImageOptions

matplotlib = pytest.importorskip("matplotlib")  # the doctor extra; it bundles a real photo (Grace Hopper, 512x600)


def _photos(tmp_path: Path) -> list[Path]:
    """The bundled photo and real-content JPEGs cut from it: landscape, portrait, odd sizes, a progressive file."""
    from matplotlib import cbook

    with Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)) as im:
        photo = im.convert("RGB")
    cuts = [
        ((0, 0, 512, 600), (512, 600), {}),
        ((0, 50, 512, 338), (500, 281), {}),  # landscape 16:9
        ((100, 0, 433, 600), (333, 500), {"progressive": True}),
        ((30, 120, 400, 436), (301, 257), {"subsampling": 0}),  # 4:4:4 chroma
        ((0, 0, 512, 600), (97, 113), {}),  # small: a 64-pixel eval upsamples it
    ]
    paths = []
    for k, (box, size, kw) in enumerate(cuts):
        path = tmp_path / f"{k}.jpg"
        photo.crop(box).resize(size, Image.LANCZOS).save(path, quality=90, **kw)
        paths.append(path)
    return paths


def _torchvision_eval(path: Path, size: int, short: int | None = None) -> np.ndarray:
    """torchvision's Resize(short, default round(size * 256 / 224)) + CenterCrop(size) on a PIL image, with PIL."""
    short = short or int(round(size * 256 / 224))
    with Image.open(path) as im:
        img = im.convert("RGB")
    w, h = img.size
    new_w, new_h = (short, int(short * h / w)) if w <= h else (int(short * w / h), short)
    img = img.resize((new_w, new_h), Image.BILINEAR, reducing_gap=None)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    return np.asarray(img.crop((left, top, left + size, top + size)))


@pytest.mark.parametrize("size", [32, 64, 128, 224])
def test_eval_transforms_match_pil_resize_and_center_crop_on_real_photos(tmp_path, size):
    paths = _photos(tmp_path)
    source = ImageSource([str(p) for p in paths], eval_transforms(size, normalize=False), with_paths=True)
    seen = 0
    for batch in stoker.Loader(source, batch_size=2, shuffle=False, num_workers=0):
        for image, path in zip(batch["image"], batch["path"]):
            ours = image.permute(1, 2, 0).numpy().astype(np.int16)
            diff = np.abs(ours - _torchvision_eval(Path(path), size)).mean()
            assert diff <= 1.0, (path, size, diff)  # levels of 255, mean over the image
            seen += 1
    assert seen == len(paths)


def test_reduced_decode_is_for_random_transforms_unless_asked():
    assert ImageOptions(eval_transforms(64)).reduced_decode is False  # pixel parity by default
    assert ImageOptions(train_transforms(64)).reduced_decode is True  # training keeps the fast decode
    assert ImageOptions(eval_transforms(64), reduced_decode=True).reduced_decode is True
    assert ImageOptions(train_transforms(64), reduced_decode=False).reduced_decode is False


def test_a_resized_store_holds_pil_resize_and_center_crop(tmp_path):
    paths = _photos(tmp_path)
    stoker.convert.images([str(p) for p in paths], tmp_path / "store", "resized", size=64)
    store = stoker.open(tmp_path / "store")
    rows = store.gather(np.arange(len(paths)), ["image"])["image"]
    for path, chw in zip(paths, rows):
        diff = np.abs(chw.transpose(1, 2, 0).astype(np.int16) - _torchvision_eval(path, 64, short=64)).mean()
        assert diff <= 1.0, (path, diff)
