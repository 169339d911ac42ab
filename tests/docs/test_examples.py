"""Every ```python block of README.md and docs/ runs, on small data this test makes.

The blocks of one page run in order in one namespace (as a reader pastes them into one session),
which starts with ``np`` (numpy) and ``stoker`` imported, in a fresh directory holding what the pages
name: ``corpus.tsv``, ``train.tsv``, ``val.tsv`` (a text and a label column), ``photos/`` (an
ImageFolder of small JPEGs), ``train.h5`` (datasets ``data`` and ``labels``) and, unless the page writes
it itself, the store ``stores/digits``. A ``--8<-- "path"`` line (pymdownx.snippets) is replaced by that
file, as the site shows it. A block that cannot run here (a GPU model, an S3 endpoint, a Ray
cluster) is preceded by ``<!-- example: skip (the reason, and which test runs its calls) -->``.
A renamed keyword or function breaks this test, not a reader.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import stoker

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"<!-- example: skip \((.+)\) -->\n$")
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)  # pymdownx.snippets: the site shows that file here


def blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, why skipped or None) of each ```python block of ``page``."""
    text = page.read_text(encoding="utf-8")
    out = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        skip = SKIP.search(before[before.rfind("\n", 0, len(before) - 1) + 1 :]) if before.endswith("\n") else None
        code = SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), match.group(1))
        out.append((before.count("\n") + 1, code, skip.group(1) if skip else None))
    return out


def make_inputs(root: Path, with_store: bool) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    words = "a good film a dull film the plot moves slowly the actors shine".split()
    for name, rows in (("corpus.tsv", 200), ("train.tsv", 60), ("val.tsv", 40)):
        lines = ["text\tlabel"] + [
            f"{' '.join(rng.choice(words, size=int(rng.integers(1, 12))))}\t{['neg', 'pos'][i % 2]}"
            for i in range(rows)
        ]
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    for label in ("cat", "dog"):
        (root / "photos" / label).mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / "photos" / label / f"{i}.jpg", quality=85)
    import h5py

    with h5py.File(root / "train.h5", "w") as f:
        f["data"] = rng.random((512, 8), dtype=np.float32)
        f["labels"] = np.arange(512) % 10
    if with_store:
        images = rng.integers(0, 256, size=(1000, 28, 28), dtype=np.uint8)
        stoker.write(root / "stores" / "digits", {"image": images, "label": np.arange(1000) % 10})


PAGES_WITH_CODE = [p for p in PAGES if blocks(p)]


def test_the_pages_have_examples_and_skips_give_reasons():
    assert ROOT / "README.md" in PAGES_WITH_CODE and len(PAGES_WITH_CODE) >= 6
    for page in PAGES_WITH_CODE:
        for line, _, why in blocks(page):
            assert why is None or len(why) > 10, f"{page}:{line}: say why the example is skipped"


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_a_page_run(page, tmp_path, monkeypatch):
    text = page.read_text(encoding="utf-8")
    make_inputs(tmp_path, with_store='stoker.write("stores/digits"' not in text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    namespace = {"np": np, "stoker": stoker, "__name__": "__example__"}
    ran = 0
    for line, code, why in blocks(page):
        if why is not None:
            continue
        try:
            exec(compile(code, f"{page.relative_to(ROOT)}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the example at {page.relative_to(ROOT)}:{line} failed: {exc!r}") from exc
        ran += 1
        for value in list(namespace.values()):  # free worker pools before the next block
            if isinstance(value, stoker.Loader):
                value.close()
    assert ran or all(why for _, _, why in blocks(page))
    assert os.getcwd() == str(tmp_path)
