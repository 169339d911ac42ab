"""Helpers that make small test images with Pillow (fast; no network)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def photo(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A smooth RGB image (JPEG-friendly, so decoded values stay close to these)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = rng.uniform(40, 200, size=3)
    img = base + 40 * np.sin(x[..., None] / (7 + 3 * seed % 5) + np.arange(3)) + 30 * np.cos(y[..., None] / 11.0)
    return np.clip(img, 0, 255).astype(np.uint8)


def save(path: Path, arr: np.ndarray, fmt: str | None = None, **kw) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, fmt, **kw)
    return path


def make_folder(tmp_path: Path) -> Path:
    """An ImageFolder tree: 3 classes (sorted names differ from creation order), 4 JPEGs each, varied sizes."""
    root = tmp_path / "photos"
    for c, cls in enumerate(["zebra", "ant", "moth"]):
        for i in range(4):
            save(root / cls / f"img{i}.jpg", photo(60 + 10 * i, 80 + 7 * c, seed=c * 4 + i), quality=92)
    return root


def corrupt_files(root: Path) -> dict[str, Path]:
    """The issue's bad inputs, written into ``root/bad``."""
    bad = root / "bad"
    bad.mkdir(parents=True, exist_ok=True)
    good = save(bad / "good.jpg", photo(64, 64), quality=90).read_bytes()
    files = {
        "truncated": bad / "truncated.jpg",
        "corrupt": bad / "corrupt.jpg",
        "text": bad / "notes.jpg",
        "empty": bad / "empty.jpg",
    }
    files["truncated"].write_bytes(good[: len(good) // 2])
    files["corrupt"].write_bytes(good[:200] + bytes(range(256)) * 4 + good[1224:])
    files["text"].write_text("this is not an image\n")
    files["empty"].write_bytes(b"")
    return files


def bad_store(tmp_path: Path) -> Path:
    """An encoded store of 7 rows; rows 1, 3, 4 and 5 hold bad bytes (written around the converter)."""
    import stoker

    files = corrupt_files(tmp_path)
    good = (tmp_path / "bad" / "good.jpg").read_bytes()
    bad = [files[name].read_bytes() for name in ("truncated", "corrupt", "text")]
    blobs = [good, bad[0], good, bad[1], bad[2], b"", good]
    schema = {"image": stoker.Binary(), "label": stoker.Scalar("int64")}
    return stoker.write(tmp_path / "s", {"image": blobs, "label": np.arange(7)}, schema=schema)
