"""How the CPU JPEG path scales with threads (the probe behind ImageSource's 8-thread default).

On the real photos of scripts/fetch_data.py images, images per second with 1, 2, 4, 8 and 16
threads (capped at the usable cores unless --all), side by side in one run:
  decode alone         simplejpeg DCT-scaled decode (>= 224 px), each thread in its own loop
  decode+crop+resize   stoker's per-image work (header, RandomResizedCrop plan, decode, crop,
                       resample, flip to uint8), each thread in its own loop
  loader <device>      stoker.Loader(ImageSource(encoded store, RandomResizedCrop + flip)),
                       batches of 128, num_workers = threads, on the CPU and (with CUDA) on the GPU

    python benchmarks/bench_jpeg_threads.py [--data data] [--seconds 2] [--all]

Figures in the README's GPU section were taken with --all on a 16-core H100 host.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import simplejpeg
import torch

sys.path.insert(0, os.path.dirname(__file__))
import stoker  # noqa: E402
import stoker.convert  # noqa: E402
from common import machine  # noqa: E402
from stoker import vision  # noqa: E402
from stoker.pipeline.schedule import usable_cores  # noqa: E402
from stoker.pipeline.threads import one_torch_thread_here  # noqa: E402
from stoker.vision.decode import probe  # noqa: E402
from stoker.vision.render import render_bytes  # noqa: E402


def threaded(work, threads: int, seconds: float) -> float:
    """Items per second of ``threads`` threads each running ``work(stop) -> count``."""
    stop, counts = threading.Event(), []

    def run() -> None:
        one_torch_thread_here()
        counts.append(work(stop))

    pool = [threading.Thread(target=run) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--all", action="store_true", help="measure 1..16 threads even past the usable cores")
    args = ap.parse_args()
    photos = Path(args.data) / "images" / "photos"
    if not photos.is_dir():
        sys.exit(f"{photos} is missing: run python scripts/fetch_data.py images --out {args.data}")
    found = vision.find_images(photos)
    blobs = [Path(p).read_bytes() for p in found.paths]
    plan = vision.Compose([vision.RandomResizedCrop(224), vision.RandomHorizontalFlip()])
    counts = [k for k in (1, 2, 4, 8, 16) if args.all or k <= usable_cores()]
    print(f"{machine()}; torch {torch.__version__}; {len(blobs)} photos; threads {counts}", flush=True)

    def decode_only(stop: threading.Event) -> int:
        n = 0
        while not stop.is_set():
            simplejpeg.decode_jpeg(blobs[n % len(blobs)], "RGB", min_height=224, min_width=224)
            n += 1
        return n

    def full_work(stop: threading.Event) -> int:
        out, n = torch.empty((3, 224, 224), dtype=torch.uint8), 0
        while not stop.is_set():
            data = blobs[n % len(blobs)]
            info = probe(data)
            render_bytes(data, info, plan.plan(info.height, info.width, random.Random(n)), "bilinear", out, True)
            n += 1
        return n

    for name, work in (("decode alone", decode_only), ("decode+crop+resize", full_work)):
        print(f"{name:<20}", {k: round(threaded(work, k, args.seconds)) for k in counts}, flush=True)

    tmp = tempfile.mkdtemp(prefix="stoker-bench-jpeg-")
    many = vision.ImageList(found.paths * 4, found.labels * 4, found.classes, found.root)
    enc = stoker.convert.images(many, os.path.join(tmp, "enc"))

    def loader_rate(device: str, workers: int) -> int:
        source = vision.ImageSource(enc.path, [vision.RandomResizedCrop(224), vision.RandomHorizontalFlip()])
        loader = stoker.Loader(source, batch_size=128, shuffle=True, device=device, num_workers=workers)
        it = iter(loader)
        next(it)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            for batch in it:
                n += len(batch["label"])
                if time.perf_counter() - t0 > args.seconds:
                    break
            else:
                it = iter(loader)
        if device == "cuda":
            torch.cuda.synchronize()
        return round(n / (time.perf_counter() - t0))

    for device in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
        print(f"{'loader ' + device:<20}", {k: loader_rate(device, k) for k in counts}, flush=True)


if __name__ == "__main__":
    main()
