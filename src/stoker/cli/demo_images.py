"""``stoker demo`` section: real photos (scripts/fetch_data.py images) to training batches.

Converts the photos to an encoded store and a resized store, then times training batches of
224x224 (RandomResizedCrop + flip, uint8 NCHW) beside the usual recipe: a per-sample
ImageFolder Dataset with PIL Resize/ToTensor/Normalize in DataLoader(num_workers=2, pin_memory=True).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from stoker.cli.demo import measure, print_rates, torch_rate


class _SeedImageFolder:
    """The usual recipe, written by hand (torchvision is optional): one JPEG per __getitem__."""

    def __init__(self, root: Path) -> None:
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = [(root / c / f, i) for i, c in enumerate(classes) for f in sorted(os.listdir(root / c))]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        import torch
        from PIL import Image

        path, label = self.samples[i]
        with Image.open(path) as im:
            img = im.convert("RGB").resize((224, 224), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float().div(255)
        mean, std = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
        return (x - mean) / std, label


def run(data: Path, seconds: float) -> None:
    import stoker
    from stoker import vision

    photos = data / "images" / "photos"
    if not photos.is_dir():
        print(f"\nimages: skipped ({photos} is missing; run: python scripts/fetch_data.py images --out {data})")
        return
    t0 = time.perf_counter()
    enc = stoker.convert.images(photos, data / "stores" / "photos", overwrite=True)
    t1 = time.perf_counter()
    res = stoker.convert.images(photos, data / "stores" / "photos-224", mode="resized", size=224, overwrite=True)
    t2 = time.perf_counter()
    print(
        f"\nPhotos (Debian plasma-workspace-wallpapers, {enc.rows:,} JPEGs ~500 px): encoded store in {t1 - t0:.1f} s, "
        f"resized 224 store in {t2 - t1:.1f} s"
    )
    train = [vision.RandomResizedCrop(224), vision.RandomHorizontalFlip()]
    enc_loader = stoker.Loader(vision.ImageSource(enc.path, train), batch_size=128, shuffle=True)
    res_loader = stoker.Loader(vision.ImageSource(res.path), batch_size=128, shuffle=True)
    first = next(iter(enc_loader))
    print("  a batch: " + ", ".join(f"{k} {tuple(v.shape)} {v.dtype}" for k, v in first.items()))
    count = lambda b: len(b["label"])  # noqa: E731
    rates = [
        (
            f"stoker encoded store (decode + RandomResizedCrop + flip, {enc_loader.engine})",
            measure(lambda: enc_loader, count, seconds),
        ),
        ("stoker resized store (uint8 224, memory copy)", measure(lambda: res_loader, count, seconds)),
    ]
    folder = _SeedImageFolder(photos)
    rate = torch_rate(folder, 128, seconds, num_workers=2, pin_memory=True, persistent_workers=True)
    rates.append(("torch DataLoader (ImageFolder + PIL Resize/ToTensor/Normalize, 2 workers)", rate))
    print_rates(
        "Photos to 224x224 training batches, shuffled, to CPU tensors (stoker: uint8; Normalize runs on the GPU)", rates
    )
