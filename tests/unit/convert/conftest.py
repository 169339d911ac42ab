"""Fixtures of the conversion tests: the image helpers of the vision tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "vision"))  # vision_images.py: small real JPEG/PNG files
from vision_images import make_folder  # noqa: E402


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)
