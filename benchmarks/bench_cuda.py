"""The CUDA path, side by side in one run, on a machine where torch sees a GPU (CI has none).

Sections (each prints its contenders and ratios; everything lands on the GPU and is synchronized
before a clock stops):
  h2d       the bus: one batch-sized pinned buffer copied host->device (the limit of any loader),
            and the same copy from pageable memory
  images    pre-decoded uint8 224x224x3, batches of 256, shuffled: stoker.Loader(device="cuda") vs
            torch DataLoader over a numpy memmap (pin_memory=True, the best of several worker
            counts) + .to(device, non_blocking=True) in the loop
  fed       a simulated training step (a chain of bf16 matmuls on the batch, calibrated to
            --step-ms) fed by each loader: the share of the loop the GPU spends computing
            (compute-alone time / loop time; 1.0 = never waits for data)
  jpeg      real photos (scripts/fetch_data.py images) to normalized 224 training batches on the GPU:
            stoker encoded store with CPU decode (libjpeg-turbo threads) and Normalize on the device,
            the same with nvJPEG (decode_device="cuda", needs torchvision), NVIDIA DALI's GPU pipeline
            (benchmarks/dali_gpu.py: mixed nvJPEG decode, resize, crop_mirror_normalize), and seed 002's recipe
            (ImageFolder + PIL + Normalize per sample, DataLoader with pin_memory) + .to(device)
  text      Friends lines (scripts/fetch_data.py text) to BERT batches on the GPU, on the fly and
            from a store

    python benchmarks/bench_cuda.py [--data data] [--seconds 3] [--json results/cuda.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import stoker  # noqa: E402
import stoker.convert  # noqa: E402
from bench_loader import MemmapImages  # noqa: E402
from common import Result, machine, print_table, save  # noqa: E402

IMG = (224, 224, 3)
BATCH = 256


def device_rate(make_iter, count, seconds: float, warmup: int = 3) -> float:
    """Samples/s over whole passes of ``make_iter()``, the device synchronized before the clock stops."""
    it = iter(make_iter())
    for _ in range(warmup):
        next(it, None)
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for batch in it:
            n += count(batch)
            if time.perf_counter() - t0 >= seconds:
                break
        else:
            it = iter(make_iter())
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t0)


def to_device(batches, device):
    """The usual loop: ``.to(device, non_blocking=True)`` on every tensor of a DataLoader batch."""
    for b in batches:
        yield [t.to(device, non_blocking=True) if isinstance(t, torch.Tensor) else t for t in b]


def bench_h2d(results: list[Result], checks: dict, seconds: float) -> float:
    nbytes = BATCH * int(np.prod(IMG))
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    out = {}
    for name, host in (
        ("pinned", torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)),
        ("pageable", torch.empty(nbytes, dtype=torch.uint8)),
    ):
        host.fill_(1)
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds / 2:
            for _ in range(10):
                dev.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
            reps += 10
        dt = time.perf_counter() - t0
        out[name] = reps * BATCH / dt
        results.append(
            Result("bus: 256x224x224x3 uint8", f"H2D copy from {name} memory", out[name], reps * nbytes / dt / 1e6)
        )
    checks["h2d_pinned_GBps"] = out["pinned"] * np.prod(IMG) / 1e9
    return out["pinned"]


def images_contenders(tmp: str, n: int):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, size=(n, *IMG), dtype=np.uint8)
    path = os.path.join(tmp, "images")
    stoker.write(path, {"image": images, "label": rng.integers(0, 1000, size=n)})
    npy = os.path.join(tmp, "images.npy")
    np.save(npy, images)
    del images
    ds = stoker.open(path)
    ds.gather(np.arange(n), ["image"])  # warm the page cache for both
    np.load(npy, mmap_mode="r").sum(dtype=np.uint64)
    return ds, npy


def bench_images(tmp: str, n: int, seconds: float, h2d: float, results: list[Result], checks: dict) -> dict:
    ds, npy = images_contenders(tmp, n)
    w = "images uint8 224 / b256 -> cuda"
    loader = stoker.Loader(ds, batch_size=BATCH, shuffle=True, device="cuda")
    s = device_rate(lambda: loader, lambda b: len(b["label"]), seconds)
    results.append(Result(w, f"stoker (default: {loader.num_workers} workers)", s, s * np.prod(IMG) / 1e6))
    best, best_dl = 0.0, None
    for workers in (4, 8, 12):
        dl = torch.utils.data.DataLoader(
            MemmapImages(npy, n),
            batch_size=BATCH,
            shuffle=True,
            num_workers=workers,
            pin_memory=True,
            persistent_workers=True,
            prefetch_factor=4,
        )
        r = device_rate(lambda dl=dl: to_device(dl, "cuda"), lambda b: len(b[1]), seconds)
        results.append(Result(w, f"torch DataLoader memmap w={workers} pin + .to()", r, r * np.prod(IMG) / 1e6))
        if r > best:
            best, best_dl = r, dl
    checks["images_cuda_vs_dataloader_best"] = s / best
    checks["images_cuda_vs_h2d_pinned"] = s / h2d
    return {"stoker": lambda: loader, "DataLoader": lambda: to_device(best_dl, "cuda"), "_keep": best_dl}


def bench_fed(makers: dict, step_ms: float, seconds: float, results: list[Result], checks: dict) -> None:
    """How busy a training loop keeps the GPU: compute alone vs compute fed by each loader."""
    weight = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    x0 = torch.randn(BATCH, 1024, device="cuda", dtype=torch.bfloat16)

    def step(images: torch.Tensor, reps: int) -> None:
        # consume the batch (a reduction over its pixels), then the model's work
        h = x0[: images.shape[0]] + images.view(images.shape[0], -1)[:, :1024].to(torch.bfloat16)
        for _ in range(reps):
            h = torch.tanh(h @ weight)

    resident = torch.zeros((BATCH, *IMG), dtype=torch.uint8, device="cuda")
    step(resident, 10)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step(resident, 1000)
    torch.cuda.synchronize()
    per_rep = (time.perf_counter() - t0) / 1000
    reps = max(1, int(step_ms / 1e3 / per_rep))

    def loop(batches, limit: float) -> tuple[int, float]:
        steps, t0 = 0, time.perf_counter()
        for b in batches:
            img = b["image"] if isinstance(b, dict) else b[0]
            step(img, reps)
            steps += 1
            if time.perf_counter() - t0 >= limit:
                break
        torch.cuda.synchronize()
        return steps, time.perf_counter() - t0

    def alone():
        while True:
            yield {"image": resident}

    a_steps, a_dt = loop(alone(), seconds)
    compute_ms = a_dt / a_steps * 1e3
    w = f"training loop, {compute_ms:.1f} ms GPU step / b256"
    results.append(Result(w, "compute alone (batch resident)", a_steps * BATCH / a_dt, extra={"step_ms": compute_ms}))
    for name, make in makers.items():
        if name.startswith("_"):
            continue
        it = make()
        loop(it, 0.5)  # warm
        steps, dt = loop(make(), seconds)
        busy = (a_dt / a_steps) / (dt / steps)
        results.append(Result(w, f"fed by {name}", steps * BATCH / dt, extra={"gpu_busy": busy}))
        checks[f"fed_{step_ms:g}ms_gpu_busy_{name}"] = busy


def bench_jpeg(data: Path, tmp: str, seconds: float, results: list[Result], checks: dict) -> None:
    from bench_vision import SeedImageFolder
    from stoker import vision

    photos = data / "images" / "photos"
    if not photos.is_dir():
        print(f"jpeg: skipped, {photos} is missing (python scripts/fetch_data.py images)")
        return
    found = vision.find_images(photos)
    many = vision.ImageList(found.paths * 4, found.labels * 4, found.classes, found.root)
    enc = stoker.convert.images(many, os.path.join(tmp, "encoded"))
    train = [vision.RandomResizedCrop(224), vision.RandomHorizontalFlip(), vision.Normalize()]
    w = "JPEG photos -> normalized 224 / b128 -> cuda"
    count = lambda b: len(b[1]) if isinstance(b, (list, tuple)) else len(b["label"])  # noqa: E731
    cpu = stoker.Loader(vision.ImageSource(enc.path, train), batch_size=128, shuffle=True, device="cuda")
    s = device_rate(lambda: cpu, count, seconds)
    results.append(Result(w, f"stoker encoded store, CPU decode ({cpu.num_workers} {cpu.engine})", s))
    checks["jpeg_stoker_cpu_decode"] = s
    try:
        gpu = stoker.Loader(
            vision.ImageSource(enc.path, train, decode_device="cuda"), batch_size=128, shuffle=True, device="cuda"
        )
        g = device_rate(lambda: gpu, count, seconds)
        results.append(Result(w, "stoker encoded store, nvJPEG decode", g))
        checks["jpeg_nvjpeg_vs_cpu_decode"] = g / s
    except stoker.StokerError as exc:
        print(f"jpeg: nvJPEG path not measured: {exc}")
        g = 0.0
    try:  # NVIDIA DALI's GPU pipeline on the same files (benchmarks/dali_gpu.py)
        import dali_gpu

        it = dali_gpu.loader(many.paths, list(many.labels or ()), 128, "gpu", threads=len(os.sched_getaffinity(0)))
        d = device_rate(lambda: dali_gpu.batches(it), count, seconds)
        results.append(Result(w, "NVIDIA DALI GPU (mixed nvJPEG decode + resize + crop_mirror_normalize)", d))
        if g:
            checks["jpeg_nvjpeg_vs_dali_gpu"] = g / d
    except ImportError as exc:
        print(f"jpeg: DALI GPU not measured: {exc} (its wheel travels in parts: docs/design-notes.md, GPU rows)")
    best = 0.0
    for workers in (8, 14):
        dl = torch.utils.data.DataLoader(
            SeedImageFolder(str(photos), 4),
            batch_size=128,
            shuffle=True,
            num_workers=workers,
            pin_memory=True,
            persistent_workers=True,
        )
        r = device_rate(lambda dl=dl: to_device(dl, "cuda"), count, seconds)
        results.append(Result(w, f"seed 002 (PIL per sample) DataLoader w={workers} pin + .to()", r))
        best = max(best, r)
        del dl
    checks["jpeg_stoker_vs_seed_best"] = s / best


def bench_text(data: Path, tmp: str, seconds: float, results: list[Result], checks: dict) -> None:
    import stoker.text

    path = data / "text" / "friends.txt"
    if not path.is_file():
        print(f"text: skipped, {path} is missing (python scripts/fetch_data.py text)")
        return
    w = "Friends lines -> BERT batches / b32 -> cuda"
    count = lambda b: len(b["input_ids"])  # noqa: E731
    fly = stoker.text.Loader(str(path), batch_size=32, max_length=128, shuffle=True, device="cuda")
    results.append(Result(w, "stoker.text on the fly", device_rate(lambda: fly, count, seconds)))
    store = stoker.convert.text(str(path), os.path.join(tmp, "friends"), max_length=128)
    st = stoker.text.Loader(store, batch_size=32, shuffle=True, device="cuda")
    results.append(Result(w, "stoker.text from a store", device_rate(lambda: st, count, seconds)))
    cpu = stoker.text.Loader(store, batch_size=32, shuffle=True)
    results.append(
        Result(
            w.replace("cuda", "cpu"),
            "stoker.text from a store (CPU, for reference)",
            device_rate(lambda: cpu, count, seconds),
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--images", type=int, default=8000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument(
        "--step-ms", default="20,5", help="simulated GPU step times for the 'fed' section (ms, comma-separated)"
    )
    ap.add_argument("--json", default="results/cuda.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_cuda needs a CUDA device; this torch sees none")
    print(f"machine: {machine()}; GPU {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    results: list[Result] = []
    checks: dict = {}
    with tempfile.TemporaryDirectory(prefix="stoker-bench-cuda-") as tmp:
        h2d = bench_h2d(results, checks, args.seconds)
        makers = bench_images(tmp, args.images, args.seconds, h2d, results, checks)
        for ms in args.step_ms.split(","):
            bench_fed(makers, float(ms), args.seconds, results, checks)
        del makers
        bench_jpeg(Path(args.data), tmp, args.seconds, results, checks)
        bench_text(Path(args.data), tmp, args.seconds, results, checks)
    print_table(results)
    print("\nchecks:")
    for key, value in checks.items():
        print(f"  {key:<44} {value:>10.4g}")
    for r in results:
        if "gpu_busy" in r.extra:
            print(f"  {r.workload}: {r.contender}: GPU busy {r.extra['gpu_busy']:.1%}")
    save(results, args.json, checks)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
