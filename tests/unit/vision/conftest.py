"""Fixtures of the vision tests (GPU tests are skipped by the root conftest where there is no CUDA)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test helpers beside this file (vision_images.py)
from vision_images import make_folder  # noqa: E402


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)
