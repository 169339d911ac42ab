"""A training loop over an encoded JPEG store with stoker, for ``stoker tune -- python ...``.

The photos store (``stoker convert images data/images/photos data/stores/photos``) read through
``stoker.vision.ImageSource`` with RandomResizedCrop(128) + flip, a small convolutional model
trained on the CPU. ``stoker tune`` runs it once per trial, puts each setting into its
``stoker.Loader`` and times its own steps:

    stoker tune --trial-batches 10 --trial-seconds 3 -- python examples/train_photos.py --data data

``--steps N`` stops after N steps (default: epochs until ended).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import torch

import stoker
from stoker import vision


def model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    store = stoker.open(Path(args.data) / "stores" / "photos")
    source = vision.ImageSource(store, vision.train_transforms(128, normalize=False))
    loader = stoker.Loader(source, batch_size=args.batch_size, shuffle=True, seed=0)
    net = model()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    done = 0
    for _epoch in itertools.count():
        for batch in loader:
            x = batch["image"].float() / 255.0
            loss = torch.nn.functional.cross_entropy(net(x), batch["label"] % 10)
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if args.steps is not None and done >= args.steps:
                return


if __name__ == "__main__":
    main()
