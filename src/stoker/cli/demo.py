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

from stoker.cli.output import table

SECTIONS: tuple[str, ...] = ("stoker.cli.demo_mnist", "stoker.cli.demo_text", "stoker.cli.demo_images")

DESCRIPTION = (
    "Build stores from real data (MNIST digits, Friends transcript lines, photos) that "
    "scripts/fetch_data.py put under --data, load each with stoker and with a torch DataLoader set up "
    "as the usual guides recommend, and print both throughputs side by side. Without the MNIST data it "
    "stops and names the command that fetches it; missing text or photos are skipped with that command."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="build stores from real data and compare loaders", description=DESCRIPTION)
    p.add_argument("--data", default="data", help="data directory filled by scripts/fetch_data.py (default data/)")
    p.add_argument(
        "--seconds",
        type=float,
        default=3.0,
        help="seconds to measure each loader at least, in whole epochs (default 3; at least one epoch)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    data = Path(args.data)
    for name in SECTIONS:
        importlib.import_module(name).run(data, args.seconds)
    return 0


def measure(make: Callable[[], Iterable[Any]], count: Callable[[Any], int], seconds: float) -> float:
    """Samples per second over whole epochs: from ``make()`` (the loader's construction) to an epoch's last batch.

    At least one whole epoch is timed, and more whole epochs until ``seconds`` have passed, so that
    the rate is what a user's epochs see: a first epoch's start-up (worker start, an on-the-fly
    loader's tokenizer pass) counts, and no partial epoch does.
    """
    t0 = time.perf_counter()
    loader = make()
    samples = 0
    while True:
        for batch in loader:
            samples += count(batch)
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return samples / max(elapsed, 1e-9)


def torch_rate(dataset: Any, batch_size: int, seconds: float, **options: Any) -> float:
    """:func:`measure` of a shuffled torch DataLoader over ``dataset`` (map-style, samples of tensors)."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without CUDA
        dl = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, **options)
        return measure(lambda: dl, lambda b: len(b[0]), seconds)


def print_rates(title: str, rates: list[tuple[str, float]]) -> None:
    base = rates[0][1]
    print(f"\n{title}")
    table(["loader", "samples/s", "vs stoker"], [(name, f"{r:,.0f}", f"{r / base:.2f}x") for name, r in rates])
