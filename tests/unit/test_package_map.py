"""The package README is the one file map: it names every module, and nothing that is gone."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "stoker"
README = (PACKAGE / "README.md").read_text()


def test_every_module_is_in_the_map():
    modules = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"]
    missing = [m for m in modules if m not in README and Path(m).name not in README]
    assert missing == []


def test_every_path_in_the_map_exists():
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", README))
    repo = PACKAGE.parents[1]
    gone = [n for n in named if "/" in n and not (PACKAGE / n).is_file() and not (repo / n).is_file()]
    assert gone == []
