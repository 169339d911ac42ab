"""The foundation's speed targets, side by side in one run.

Workloads (issue 2):
  images  pre-decoded uint8 224x224x3 rows, batches of 256, shuffled, CPU, warm page cache.
          Contenders: a memcpy of the same bytes (the physical limit), stoker.Loader, and the
          seeds' pattern: a numpy-memmap Dataset in torch DataLoader(num_workers=2, pin_memory=True).
  tokens  variable-length token ids (mean ~20), padded batches of 32, shuffled. Contenders:
          stoker.Loader and a per-sample Dataset + pad_sequence collate in DataLoader(num_workers=2).
  tensordataset  the seeds' TensorDataset loops (seed 003: float32 3x224x224, batches of 64;
          seed 002: float32 rows of 100, batches of 64) in torch DataLoader as the seeds write them
          (2 workers, pin_memory) and with no workers, vs stoker.Loader(TensorDataset), which reads
          a plain TensorDataset batch-level; "before" forces the per-sample process path it used.
  split   (issue 16) a random_split part of a 60k-row 28x28 uint8 store: stoker.Loader(part) vs
          torch DataLoader(part) (w=0, w=2) vs stoker.Loader over the whole store.
Also: time to first batch (a fresh process, imports not counted), and RSS growth over 20 epochs.

    python benchmarks/bench_loader.py [--images 8000] [--rows 200000] [--seconds 3] [--json results/loader.json]
                                      [--only images|tokens|tensordataset|split]

Pixels are synthetic (their values do not change copy speed); token lengths follow real
short sentences (mean ~20, long tail).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import stoker  # noqa: E402
from common import Result, first_batch_fresh_process, print_table, rate, rss_mb, save  # noqa: E402

IMG = (224, 224, 3)


class MemmapImages(torch.utils.data.Dataset):
    """The seeds' pattern: one sample per __getitem__ from a numpy memmap."""

    def __init__(self, path: str, n: int) -> None:
        self.path, self.n = path, n
        self.arr = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.arr is None:
            self.arr = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.arr[i])), i


class MemmapTokens(torch.utils.data.Dataset):
    """The seeds' pattern for token ids: flat ids + offsets in .npy memmaps, one row per __getitem__."""

    def __init__(self, values: str, offsets: str) -> None:
        self.paths = (values, offsets)
        self.values = self.offsets = None
        self.n = len(np.load(offsets, mmap_mode="r")) - 1

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.values is None:
            self.values, self.offsets = (np.load(p, mmap_mode="r") for p in self.paths)
        a, b = self.offsets[i], self.offsets[i + 1]
        return torch.from_numpy(np.array(self.values[a:b])), i


def pad_collate(samples):
    ids = torch.nn.utils.rnn.pad_sequence([s[0] for s in samples], batch_first=True)
    return ids, torch.tensor([s[1] for s in samples])


def token_lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.clip(rng.lognormal(mean=2.85, sigma=0.45, size=n).astype(np.int64), 3, 128)


def bench_images(tmp: str, n: int, seconds: float, results: list[Result], checks: dict) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, size=(n, *IMG), dtype=np.uint8)
    labels = rng.integers(0, 1000, size=n)
    store_path = os.path.join(tmp, "images")
    t0 = time.perf_counter()
    stoker.write(store_path, {"image": images, "label": labels})
    write_s = time.perf_counter() - t0
    npy = os.path.join(tmp, "images.npy")
    np.save(npy, images)
    del images
    ds = stoker.open(store_path)
    row = int(np.prod(IMG))
    batch = 256
    # warm the page cache for both copies
    ds.gather(np.arange(n), ["image"])
    np.load(npy, mmap_mode="r").sum(dtype=np.uint64)

    src = np.asarray(ds.gather(np.arange(batch), ["image"])["image"])
    dst = np.empty_like(src)
    t0 = time.perf_counter()
    reps = 0
    while time.perf_counter() - t0 < seconds / 2:
        np.copyto(dst, src)
        reps += 1
    memcpy = reps * batch / (time.perf_counter() - t0)
    results.append(Result("images 224 uint8 / b256", "memcpy (same bytes, 1 thread)", memcpy, memcpy * row / 1e6))

    loader = stoker.Loader(ds, batch_size=batch, shuffle=True, columns=["image", "label"])
    sps, mbs = rate(lambda: loader, lambda b: len(b["label"]), seconds=seconds, nbytes=lambda b: b["image"].nbytes)
    results.append(Result("images 224 uint8 / b256", f"stoker (default: {loader.num_workers} workers)", sps, mbs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without CUDA
        dl = torch.utils.data.DataLoader(
            MemmapImages(npy, n),
            batch_size=batch,
            shuffle=True,
            num_workers=2,
            pin_memory=True,
            persistent_workers=True,
        )
        dsps, dmbs = rate(lambda: dl, lambda b: len(b[1]), seconds=seconds, nbytes=lambda b: b[0].nbytes)
    results.append(Result("images 224 uint8 / b256", "torch DataLoader memmap w=2 pin", dsps, dmbs))
    checks["images_vs_memcpy"] = sps / memcpy
    checks["images_vs_dataloader"] = sps / dsps
    checks["images_write_s"] = write_s
    checks["images_first_batch_s"] = first_batch_fresh_process(store_path, batch_size=batch, shuffle=True)


def bench_tokens(tmp: str, n: int, seconds: float, results: list[Result], checks: dict) -> None:
    rng = np.random.default_rng(1)
    lengths = token_lengths(n, rng)
    rows = [rng.integers(1000, 30000, size=k, dtype=np.int32) for k in lengths]
    path = os.path.join(tmp, "tokens")
    stoker.write(
        path,
        {"ids": rows, "label": rng.integers(0, 2, size=n)},
        {"ids": stoker.Sequence("int32"), "label": stoker.Scalar("int64")},
    )
    ds = stoker.open(path)
    batch = 32
    loader = stoker.Loader(ds, batch_size=batch, shuffle=True)  # default workers: inline for small batches
    sps, _ = rate(lambda: loader, lambda b: len(b["label"]), seconds=seconds)
    results.append(Result("token ids (mean ~20) / b32", f"stoker (default: {loader.num_workers} workers)", sps))
    loader2 = stoker.Loader(ds, batch_size=batch, shuffle=True, num_workers=2)
    sps2, _ = rate(lambda: loader2, lambda b: len(b["label"]), seconds=seconds)
    results.append(Result("token ids (mean ~20) / b32", "stoker num_workers=2", sps2))
    ragged = stoker.Ragged.from_rows(rows)
    np.save(os.path.join(tmp, "ids.npy"), ragged.values)
    np.save(os.path.join(tmp, "offsets.npy"), ragged.offsets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without CUDA
        dl = torch.utils.data.DataLoader(
            MemmapTokens(os.path.join(tmp, "ids.npy"), os.path.join(tmp, "offsets.npy")),
            batch_size=batch,
            shuffle=True,
            num_workers=2,
            pin_memory=True,
            collate_fn=pad_collate,
            persistent_workers=True,
        )
        dsps, _ = rate(lambda: dl, lambda b: len(b[1]), seconds=seconds)
    results.append(Result("token ids (mean ~20) / b32", "torch DataLoader memmap w=2 pin", dsps))
    checks["tokens_samples_per_s"] = sps
    checks["tokens_vs_dataloader"] = sps / dsps
    checks["tokens_first_batch_s"] = first_batch_fresh_process(path, batch_size=batch, shuffle=True)

    # RSS over 20 epochs (the first 20,000 rows of each epoch, threads on)
    epochs_rows = min(n, 20000)
    sub = stoker.Loader(stoker.open(path), batch_size=batch, shuffle=True, num_workers=2)
    rss = []
    for _ in range(20):
        for i, _b in enumerate(sub):
            if i * batch >= epochs_rows:
                break
        rss.append(rss_mb())
    checks["rss_epoch1_mb"] = rss[0]
    checks["rss_epoch20_mb"] = rss[-1]
    checks["rss_growth"] = rss[-1] / rss[0] - 1


class _OwnGetitem(torch.utils.data.TensorDataset):
    """A TensorDataset subclass: the Loader must call its __getitem__, as it did for every TensorDataset before."""


def bench_tensordataset(seconds: float, results: list[Result], checks: dict) -> None:
    """The seeds' TensorDataset loops (seed 003: float32 3x224x224, batches of 64; seed 002: float32
    rows of 100, batches of 64), shuffled, as the seeds write them and through stoker.Loader."""
    gen = torch.Generator().manual_seed(0)
    for name, shape, n in (
        ("seed 003: float32 3x224x224 / b64", (3, 224, 224), 2000),
        ("seed 002: float32 x100 / b64", (100,), 100_000),
    ):
        ds = torch.utils.data.TensorDataset(
            torch.randn((n, *shape), generator=gen), torch.randint(0, 10, (n,), generator=gen)
        )
        count = lambda b: len(b[1])  # noqa: E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pin_memory without CUDA
            contenders = {
                "torch DataLoader w=2 pin (the seeds)": torch.utils.data.DataLoader(
                    ds, batch_size=64, shuffle=True, num_workers=2, pin_memory=True, persistent_workers=True
                ),
                "torch DataLoader w=0": torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True),
                "before: __getitem__ in processes (stoker 0a23386)": stoker.Loader(
                    _OwnGetitem(*ds.tensors), batch_size=64, shuffle=True, num_workers=2, persistent_workers=True
                ),
                "stoker.Loader(TensorDataset)": stoker.Loader(ds, batch_size=64, shuffle=True),
            }
            rates = {k: rate(lambda v=v: v, count, seconds=seconds)[0] for k, v in contenders.items()}
        for k, r in rates.items():
            results.append(Result(name, k, r))
        key = "tensordataset_" + name.split(":")[0].replace(" ", "")
        checks[key + "_vs_seed_loop"] = (
            rates["stoker.Loader(TensorDataset)"] / rates["torch DataLoader w=2 pin (the seeds)"]
        )
        checks[key + "_vs_best_dataloader"] = rates["stoker.Loader(TensorDataset)"] / max(
            rates["torch DataLoader w=2 pin (the seeds)"], rates["torch DataLoader w=0"]
        )


def bench_split(tmp: str, n: int, seconds: float, results: list[Result], checks: dict) -> None:
    """A random_split part of a store (issue 16 item 5): 28x28 uint8 rows + labels, batches of 256,
    shuffled, through stoker.Loader (a store view, batch-level) and torch's DataLoader (per sample),
    against stoker.Loader over the whole store."""
    rng = np.random.default_rng(0)
    path = stoker.write(
        os.path.join(tmp, "split"),
        {"image": rng.integers(0, 255, size=(n, 28, 28), dtype=np.uint8), "label": rng.integers(0, 10, size=n)},
    )
    store = stoker.open(path)
    train = torch.utils.data.random_split(store, [0.8, 0.2], generator=torch.Generator().manual_seed(0))[0]
    count = lambda b: len(b["label"])  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        contenders = {
            "stoker.Loader(store) (whole store)": stoker.Loader(store, batch_size=256, shuffle=True),
            "stoker.Loader(random_split(store)[0])": stoker.Loader(train, batch_size=256, shuffle=True),
            "torch DataLoader(random_split(store)[0]) w=0": torch.utils.data.DataLoader(
                train, batch_size=256, shuffle=True
            ),
            "torch DataLoader(random_split(store)[0]) w=2": torch.utils.data.DataLoader(
                train, batch_size=256, shuffle=True, num_workers=2, persistent_workers=True
            ),
        }
        rates = {k: rate(lambda v=v: v, count, seconds=seconds)[0] for k, v in contenders.items()}
    for k, r in rates.items():
        results.append(Result("random_split of a store, 28x28 uint8 / b256", k, r))
    split = rates["stoker.Loader(random_split(store)[0])"]
    checks["split_vs_whole_store"] = split / rates["stoker.Loader(store) (whole store)"]
    checks["split_vs_dataloader"] = split / max(v for k, v in rates.items() if k.startswith("torch"))


def _memcpy(src: np.ndarray, batch: int, seconds: float, threads: int) -> float:
    """Rows/s that ``threads`` threads copy, each copying batch-sized blocks of rows from its own
    successive places in ``src`` (>= 256 MiB: memory, not cache) into its own batch buffer."""
    import concurrent.futures as cf

    def one(k: int) -> int:
        dst = np.empty((batch, *src.shape[1:]), src.dtype)
        dst.fill(0)
        starts = range(k * batch, len(src) - batch + 1, threads * batch)
        rows, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for a in starts:
                np.copyto(dst, src[a : a + batch])
                rows += batch
        return rows

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(threads) as pool:
        rows = sum(pool.map(one, range(threads)))
    return rows / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=8000)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json", default="results/loader.json")
    ap.add_argument("--only", choices=("images", "tokens", "tensordataset", "split"), help="run one workload")
    args = ap.parse_args()
    results: list[Result] = []
    checks: dict = {}
    run = lambda name: args.only in (None, name)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="stoker-bench-") as tmp:
        if run("images"):
            bench_images(tmp, args.images, args.seconds, results, checks)
        if run("tokens"):
            bench_tokens(tmp, args.rows, args.seconds, results, checks)
        if run("split"):
            bench_split(tmp, 60_000, args.seconds, results, checks)
    if run("tensordataset"):
        bench_tensordataset(args.seconds, results, checks)
    print_table(results)
    print("\nchecks (issue 2 targets):")
    targets = {
        "images_vs_memcpy": (">=", 0.5),
        "images_vs_dataloader": (">=", 3.0),
        "tokens_samples_per_s": (">=", 300_000),
        "tokens_vs_dataloader": (">=", 20.0),
        "images_first_batch_s": ("<=", 0.3),
        "tokens_first_batch_s": ("<=", 0.3),
        "rss_growth": ("<=", 0.05),
    }
    for key, value in checks.items():
        target = targets.get(key)
        verdict = ""
        if target:
            ok = value >= target[1] if target[0] == ">=" else value <= target[1]
            verdict = f"target {target[0]} {target[1]:g}: {'PASS' if ok else 'MISS'}"
        print(f"  {key:<24} {value:>14.4g}   {verdict}")
    save(results, args.json, checks)
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
