"""A training loop written the way the usual guides recommend (seed 002's recipe), for `stoker doctor`.

One JPEG decoded, resized and normalized per ``__getitem__`` with PIL, float tensors through a
``DataLoader(num_workers=2, pin_memory=True)``, a small convolutional model on the CPU. ``make demo``
runs it under ``stoker doctor`` to show the diagnosis on real photos:

    stoker doctor --out data/doctor -- python examples/seed_train.py --data data --steps 20
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class PhotoFolder(torch.utils.data.Dataset):
    """ImageFolder by hand (torchvision is optional): decode, resize, normalize per sample."""

    def __init__(self, root: Path, size: int = 128) -> None:
        classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        self.samples = [(root / c / f, i) for i, c in enumerate(classes) for f in sorted(os.listdir(root / c))]
        self.size = size

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, label = self.samples[i]
        with Image.open(path) as im:
            im = im.convert("RGB").resize((self.size, self.size), Image.BILINEAR)
        x = (np.asarray(im, dtype=np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(x.transpose(2, 0, 1).copy()), label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data", help="data directory (scripts/fetch_data.py images)")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    root = Path(args.data) / "images" / "photos"
    if not root.is_dir():
        raise SystemExit(f"{root} is missing; run: python scripts/fetch_data.py images --out {args.data}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without CUDA
        loader = torch.utils.data.DataLoader(
            PhotoFolder(root), batch_size=32, shuffle=True, num_workers=2, pin_memory=True
        )
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=2),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(16, 100),
        )
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for step, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y % 100)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step + 1 >= args.steps:
                break
    print(f"trained {args.steps} steps, last loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
