"""Raw data of each workload, written once as .npy files every contender starts from.

Workloads (all shuffled, batches on the CPU):
  images_uint8  pre-resized uint8 224x224x3 images + int64 labels, batches of 256
  token_ids     pre-tokenized ids (int32, mean ~20, long tail) + labels, padded batches of 32
  tensors       plain float32 features (3x32x32) + int64 labels, batches of 512
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Workload:
    name: str
    rows: int
    batch_size: int
    description: str


WORKLOADS = {
    "images_uint8": Workload("images_uint8", 6000, 256, "pre-resized uint8 224x224x3 -> batches of 256"),
    "token_ids": Workload("token_ids", 200_000, 32, "pre-tokenized ids (mean ~20) -> padded batches of 32"),
    "tensors": Workload("tensors", 100_000, 512, "float32 3x32x32 + label -> batches of 512"),
}


def make_raw(workload: Workload, root: Path) -> Path:
    """Write the workload's raw arrays under ``root/<name>/raw`` once; returns that directory."""
    raw = root / workload.name / "raw"
    if (raw / "done").is_file():
        return raw
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n = workload.rows
    np.save(raw / "labels.npy", rng.integers(0, 1000, size=n).astype(np.int64))
    if workload.name == "images_uint8":
        x = np.lib.format.open_memmap(raw / "x.npy", mode="w+", dtype=np.uint8, shape=(n, 224, 224, 3))
        for start in range(0, n, 500):
            x[start : start + 500] = rng.integers(0, 255, size=(min(500, n - start), 224, 224, 3), dtype=np.uint8)
        x.flush()
        del x
    elif workload.name == "token_ids":
        lengths = np.clip(rng.lognormal(2.85, 0.45, size=n).astype(np.int64), 3, 128)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        np.save(raw / "ids.npy", rng.integers(1000, 30000, size=int(offsets[-1])).astype(np.int32))
        np.save(raw / "offsets.npy", offsets)
    elif workload.name == "tensors":
        np.save(raw / "x.npy", rng.standard_normal((n, 3, 32, 32), dtype=np.float32))
    else:
        raise ValueError(f"unknown workload {workload.name!r}")
    (raw / "done").write_text("ok")
    return raw


def token_rows(raw: Path) -> tuple[np.ndarray, np.ndarray]:
    return np.load(raw / "ids.npy", mmap_mode="r"), np.load(raw / "offsets.npy")
