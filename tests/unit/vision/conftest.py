"""Fixtures of the vision tests, and the skip of GPU tests where there is no CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from vision_images import make_folder


@pytest.fixture(autouse=True)
def _skip_without_cuda(request):
    if request.node.get_closest_marker("gpu") and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path)
