"""The store layer never imports stoker.remote (not even inside a function), and neither package has a file cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "stoker"


def _imports(path: Path) -> set[str]:
    """Every stoker module ``path`` imports, at any depth of its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("stoker"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("stoker"))
    return found


def _modules() -> dict[str, Path]:
    files = [*PACKAGE.joinpath("store").glob("*.py"), *PACKAGE.joinpath("remote").glob("*.py"), PACKAGE / "stores.py"]
    return {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p for p in files}


def test_the_store_never_imports_remote():
    bad = {
        name: sorted(i for i in _imports(path) if i.startswith(("stoker.remote", "stoker.stores")))
        for name, path in _modules().items()
        if name.startswith("stoker.store.") or name == "stoker.store"
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_no_file_cycle_in_store_and_remote():
    modules = _modules()
    graph = {name: {i for i in _imports(path) if i in modules and i != name} for name, path in modules.items()}
    packages = {n for n in modules if modules[n].name == "__init__.py"}  # a package's __init__ re-exports below it

    def cycle_from(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node] - packages:
                if nxt == start:
                    return path
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
        return None

    cycles = [c for n in modules if n not in packages and (c := cycle_from(n))]
    assert cycles == []
