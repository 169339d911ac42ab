"""Tiny stores for the tuner's tests: a plain one and an encoded JPEG one, written here."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import stoker
import stoker.convert


@pytest.fixture
def plain_store(tmp_path):
    """200 rows: a float vector, a label and a variable-length id list, over several shards."""
    rng = np.random.default_rng(3)
    n = 200
    path = tmp_path / "plain"
    stoker.write(
        path,
        {
            "x": rng.random((n, 8), dtype=np.float32),
            "label": np.arange(n, dtype=np.int64),
            "ids": [rng.integers(0, 1000, size=int(k), dtype=np.int32) for k in rng.integers(1, 9, size=n)],
        },
        shard_size=2048,
    )
    return path


@pytest.fixture
def image_store(tmp_path):
    """24 JPEGs of 40x30 in two classes, converted into an encoded store (its training crop: 16)."""
    rng = np.random.default_rng(5)
    for i in range(24):
        folder = tmp_path / "photos" / ("cat" if i % 2 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 255, size=(30, 40, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:02d}.jpg", quality=90)
    stoker.convert.images(tmp_path / "photos", tmp_path / "images")
    return tmp_path / "images"
