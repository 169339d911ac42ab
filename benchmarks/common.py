"""Shared helpers for benchmarks: timing loops, a results table with ratios, JSON output.

Benchmarks run every contender in one process run on the same data and report ratios:
the machines are noisy, absolute numbers drift, ratios measured side by side do not.
"""

from __future__ import annotations

import json
import os
import platform
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any


@dataclass
class Result:
    workload: str
    contender: str
    samples_per_s: float
    mb_per_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def rate(
    make_iter: Callable[[], Iterable[Any]],
    count: Callable[[Any], int],
    *,
    seconds: float = 3.0,
    nbytes: Callable[[Any], int] | None = None,
    warmup: int = 2,
) -> tuple[float, float]:
    """(samples/s, MB/s) over whole passes of ``make_iter()``, at least ``seconds`` long, after ``warmup`` batches."""
    it = iter(make_iter())
    for _ in range(warmup):
        next(it, None)
    samples = 0
    byts = 0
    t0 = time.perf_counter()
    while True:
        for batch in it:
            samples += count(batch)
            if nbytes is not None:
                byts += nbytes(batch)
            if time.perf_counter() - t0 >= seconds:
                break
        else:
            it = iter(make_iter())
            continue
        break
    dt = time.perf_counter() - t0
    close = getattr(it, "close", None)
    if close:
        close()
    return samples / dt, byts / dt / 1e6


def first_batch_fresh_process(store: str, **loader_options: Any) -> float:
    """Seconds from ``stoker.open`` to the first batch in a new process (imports not counted),
    as a user starting a training script sees it. The median of three runs."""
    import subprocess
    import sys

    code = (
        "import time, stoker\n"
        "t0 = time.perf_counter()\n"
        f"it = iter(stoker.Loader(stoker.open({store!r}), **{loader_options!r}))\n"
        "next(it)\n"
        "print(time.perf_counter() - t0)\n"
    )
    times = sorted(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(3)
    )
    return times[1]


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def machine() -> str:
    import psutil

    mem = psutil.virtual_memory().total / 2**30
    return f"{platform.machine()}, {os.cpu_count()} vCPU, {mem:.0f} GiB RAM, {platform.python_implementation()} {platform.python_version()}"


# -- physical limits: the work itself, with no loader around it --------------------------------------
BARE_PIECE = 4096  # texts per encode_batch call of the bare tokenizer (rayon spreads each over the cores)


def bare_passes(encode: Callable[[list[str]], Any], texts: list[str]) -> Callable[[float], tuple[int, float]]:
    """``run(seconds) -> (texts, seconds)``: encode_batch over consecutive pieces of BARE_PIECE texts, cycling."""
    pieces = [texts[i : i + BARE_PIECE] for i in range(0, len(texts), BARE_PIECE)]
    at = [0]

    def run(seconds: float) -> tuple[int, float]:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            piece = pieces[at[0] % len(pieces)]
            at[0] += 1
            encode(piece)
            n += len(piece)
        return n, time.perf_counter() - t0

    return run


def one_thread_images(blobs: list[bytes], seconds: float, full_decode: bool, size: int = 224) -> float:
    """Images per second of the per-image training work alone (header, RandomResizedCrop plan,
    decode, crop, resample, flip to uint8), in one plain thread with torch single-threaded:
    x cores, the limit of any loader on this machine. ``full_decode=False`` is stoker's own work
    (DCT-scaled decode at 1/2-1/8 when the crop allows); ``True`` decodes the whole JPEG with
    simplejpeg and resizes it (the usual one-core figure)."""
    result: list[float] = []
    worker = threading.Thread(target=lambda: result.append(_one_thread_images(blobs, seconds, full_decode, size)))
    worker.start()
    worker.join()
    return result[0]


def _one_thread_images(blobs: list[bytes], seconds: float, full_decode: bool, size: int) -> float:
    import torch

    from stoker import vision
    from stoker.pipeline.threads import one_torch_thread_here
    from stoker.vision.decode import probe
    from stoker.vision.render import render_bytes, resample
    from stoker.vision.transforms import View

    one_torch_thread_here()
    plan = vision.Compose((vision.RandomResizedCrop(size), vision.RandomHorizontalFlip()))
    out = torch.empty((3, size, size), dtype=torch.uint8)
    n, t0, row = 0, time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        data = blobs[row % len(blobs)]
        info = probe(data)
        if full_decode:
            arr = vision.decode(data, info)
            resample(arr, View.full(*arr.shape[:2]).resize(size, size), "bilinear", out, True)
        else:
            render_bytes(data, info, plan.plan(info.height, info.width, random.Random(row)), "bilinear", out, True)
        n, row = n + 1, row + 1
    return n / (time.perf_counter() - t0)


def print_table(results: list[Result], baseline: str = "stoker") -> None:
    by_workload: dict[str, list[Result]] = {}
    for r in results:
        by_workload.setdefault(r.workload, []).append(r)
    print(f"\n{'workload':<28} {'contender':<34} {'samples/s':>12} {'MB/s':>9} {'vs stoker':>9}")
    for workload, rows in by_workload.items():
        base = next((r.samples_per_s for r in rows if r.contender.startswith(baseline)), None)
        for r in rows:
            ratio = f"{r.samples_per_s / base:.3f}x" if base else "-"
            mb = f"{r.mb_per_s:.0f}" if r.mb_per_s else ""
            print(f"{workload:<28} {r.contender:<34} {r.samples_per_s:>12,.0f} {mb:>9} {ratio:>9}")


def save(results: list[Result], path: str, checks: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(
            {
                "date": date.today().isoformat(),
                "machine": machine(),
                "results": [asdict(r) for r in results],
                "checks": checks,
            },
            f,
            indent=2,
        )
