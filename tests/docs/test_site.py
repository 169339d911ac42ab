"""The documentation site builds with warnings as errors, and its pages render in headless Chromium.

Skipped where mkdocs (``pip install -e ".[docs]"``, part of ``dev``) or Chromium is missing, and says which.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 120  # bounds a hang only; nothing here asserts a time
HAS_MKDOCS = all(importlib.util.find_spec(m) is not None for m in ("mkdocs", "material", "mkdocstrings_handlers"))


def _browser() -> str | None:
    for name in (os.environ.get("STOKER_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


needs_mkdocs = pytest.mark.skipif(
    not HAS_MKDOCS, reason='needs mkdocs, mkdocs-material and mkdocstrings[python]: pip install -e ".[docs]"'
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=HANG_S * 3, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-3000:]}"
    return out


@needs_mkdocs
def test_the_site_builds_strict_with_every_page_and_reference(site):
    for page in ("index.html", "guides/text/index.html", "guides/reliability/index.html", "performance/index.html"):
        assert (site / page).is_file(), page
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("stoker.Loader", "stoker.write", "stoker.vision.ImageSource", "stoker.text.Loader"):
        assert f'id="{name}"' in api, name  # rendered by mkdocstrings from the docstrings
    knobs = (site / "reference" / "knobs" / "index.html").read_text(encoding="utf-8")
    assert "STOKER_CACHE_DIR" in knobs and "in_batch_order" in knobs


def _shot(tmp_path: Path, page: Path, name: str) -> tuple[str, Path]:
    base = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-extensions",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,1600",
    ]
    shot = tmp_path / f"{name}.png"
    subprocess.run([*base, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=HANG_S)
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=HANG_S).stdout
    return dom, shot


@needs_mkdocs
@pytest.mark.browser
@pytest.mark.skipif(
    _browser() is None, reason="needs headless Chromium: apt-get install chromium (or set STOKER_CHROMIUM)"
)
@pytest.mark.parametrize(
    "page, words",
    [("index.html", ["stoker keeps GPUs fed", "Guides"]), ("guides/text/index.html", ["Text", "stoker.text.Loader"])],
)
def test_a_page_renders_in_headless_chromium(site, tmp_path, page, words):
    from PIL import Image

    dom, shot = _shot(tmp_path, site / page, re.sub(r"\W", "_", page))
    assert 'class="md-header' in dom and 'class="md-nav' in dom  # the Material theme's header and navigation
    text = re.sub(r"<[^>]+>", " ", dom)
    assert all(w in text for w in words)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1600)
    colors = image.getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50  # text, the coloured header and code blocks, not a blank page
    top = image.crop((0, 0, 1280, 40)).convert("RGB").getcolors(maxcolors=1 << 16) or []
    assert max(colors, key=lambda c: c[0])[1] != max(top, key=lambda c: c[0])[1]  # the header bar is drawn
    keep = os.environ.get("STOKER_DOCS_SCREENSHOTS")  # set it to a directory to look at the pages
    if keep:
        shutil.copy(shot, Path(keep) / shot.name)
