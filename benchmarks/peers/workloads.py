"""Raw data of each workload, written once as .npy files every contender starts from.

Workloads (all shuffled, batches on the CPU):
  text_bert     raw text (the Friends transcript lines, 61k, real) -> bert-base-uncased ids,
                max_length 128, padded batches of 32
  token_ids     pre-tokenized ids (int32, mean ~20, long tail) + labels, padded batches of 32
  images_jpeg   real photos (JPEG, ~500 px, 4x the ~1,200 crops per epoch) -> RandomResizedCrop
                224 + horizontal flip, uint8 batches of 128
  images_uint8  pre-resized uint8 224x224x3 images + int64 labels, batches of 256
  tensors       plain float32 features (3x32x32) + int64 labels, batches of 512

The two real-data workloads start from ``scripts/fetch_data.py text images`` (``--data``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Workload:
    name: str
    rows: int
    batch_size: int
    description: str


MAX_LENGTH = 128  # text_bert
IMAGE_SIZE = 224  # images_jpeg
IMAGE_REPEAT = 4  # images_jpeg: an epoch holds the photos this many times (epoch ends weigh as on a large set)

WORKLOADS = {
    "text_bert": Workload(
        "text_bert", 0, 32, "raw text (Friends lines) -> bert-base-uncased, max_length 128, batches of 32"
    ),
    "token_ids": Workload("token_ids", 200_000, 32, "pre-tokenized ids (mean ~20) -> padded batches of 32"),
    "images_jpeg": Workload(
        "images_jpeg", 0, 128, "real JPEG photos -> RandomResizedCrop 224 + flip, uint8, batches of 128"
    ),
    "images_uint8": Workload("images_uint8", 6000, 256, "pre-resized uint8 224x224x3 -> batches of 256"),
    "tensors": Workload("tensors", 100_000, 512, "float32 3x32x32 + label -> batches of 512"),
}


def make_raw(workload: Workload, root: Path, data: Path = Path("data")) -> Path:
    """Write the workload's raw data under ``root/<name>/raw`` once; returns that directory.

    ``data`` is where ``scripts/fetch_data.py`` put the real text and photos."""
    raw = root / workload.name / "raw"
    if (raw / "done").is_file():
        return raw
    if workload.name in ("text_bert", "images_jpeg"):
        return _real_raw(workload, raw, data)
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


def _real_raw(workload: Workload, raw: Path, data: Path) -> Path:
    if workload.name == "text_bert":
        src = data / "text" / "friends.tsv"
        if not src.is_file():
            raise FileNotFoundError(f"{src} is missing: run python scripts/fetch_data.py text --out {data}")
        rows = [line.split("\t", 1) for line in src.read_text(encoding="utf-8").split("\n")[1:] if "\t" in line]
        rows = [(speaker, text) for speaker, text in rows if text.strip()]
        speakers = {s: i for i, s in enumerate(sorted({s for s, _ in rows}))}
        raw.mkdir(parents=True, exist_ok=True)
        (raw / "texts.txt").write_text("".join(t + "\n" for _, t in rows), encoding="utf-8")
        np.save(raw / "labels.npy", np.asarray([speakers[s] for s, _ in rows], dtype=np.int64))
        shutil.copy(data / "text" / "vocab.txt", raw / "vocab.txt")
    else:
        photos = data / "images" / "photos"
        if not photos.is_dir():
            raise FileNotFoundError(f"{photos} is missing: run python scripts/fetch_data.py images --out {data}")
        classes = sorted(d.name for d in photos.iterdir() if d.is_dir())
        files = [
            (str(f.resolve()), i)
            for i, c in enumerate(classes)
            for f in sorted((photos / c).iterdir())
            if f.suffix.lower() in (".jpg", ".jpeg")
        ]
        files = files * IMAGE_REPEAT
        raw.mkdir(parents=True, exist_ok=True)
        (raw / "paths.txt").write_text("".join(p + "\n" for p, _ in files))
        np.save(raw / "labels.npy", np.asarray([label for _, label in files], dtype=np.int64))
    (raw / "done").write_text("ok")
    return raw


def texts(raw: Path) -> tuple[list[str], np.ndarray]:
    """text_bert: the raw lines and their speaker labels."""
    return (raw / "texts.txt").read_text(encoding="utf-8").split("\n")[:-1], np.load(raw / "labels.npy")


def image_files(raw: Path) -> tuple[list[str], np.ndarray]:
    """images_jpeg: the JPEG paths of one epoch (the photos IMAGE_REPEAT times) and their labels."""
    return (raw / "paths.txt").read_text().split("\n")[:-1], np.load(raw / "labels.npy")
