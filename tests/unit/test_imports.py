"""Imports flow one way: no cycle between files, none between packages, none from a lower layer to a higher one.

Every ``import`` of every module of ``src/stoker`` counts, wherever it stands: at the top, inside a function
(a deferred import still makes the module depend on the other at run time), and under ``if TYPE_CHECKING:``
(a type a lower layer names belongs to that layer or below it; a cycle through annotations is still a cycle
a reader has to untangle). ``stoker/__init__.py`` is the public surface: it stands as high as the highest
layer it imports, so the layers above it (``tune``, ``cli``) may ``import stoker``. The files ``stoker.boot``
loads by path in a child Python (``doctor/child.py``'s ``events.py``, ``recorder.py``, ``settings.py``) are
not imports; they stay within their own package or go down to ``settings``.

:data:`LAYERS` is the layer picture of ``src/stoker/README.md`` as data (the README points here): one row per
layer, low to high. A module may import its own layer and the layers below; :data:`APART` names the pairs of
one layer that must not import each other.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "stoker"

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(row.split())
    for row in (
        "errors labels settings boot",  # helpers: the exception tree, label maps, STOKER_* knobs, child start-up
        "store device",  # the format on disk; pinned buffers and copies (independent)
        "remote stores",  # object stores (store never imports them); stores.py: open/write/merge, a path or a URL
        "pipeline",  # contracts, sources, samplers, the executor
        "config loader",  # the Loader facade and its frozen options
        "text vision sources lightning",  # domain sources
        "convert",  # everything that writes a store
        "doctor tune",  # observe and search loaders (they do not import each other)
        "cli",  # the command line
    )
)
APART = {frozenset({"store", "device"}), frozenset({"doctor", "tune"})}


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module file an imported name lands in: the longest known prefix (a name from a module is the module)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target is not None and target != module:
                found.add(target)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def _unit(module: str) -> str:
    """A module's package (``store``, ``doctor``, ...), or its own name for a top-level module."""
    return module.split(".")[1] if module != "stoker" else "stoker"


def _layer(unit: str) -> int:
    if unit == "stoker":  # the public surface stands as high as the highest layer it imports
        return max(_layer(_unit(t)) for t in GRAPH["stoker"])
    for i, row in enumerate(LAYERS):
        if unit in row:
            return i
    raise AssertionError(f"stoker.{unit} is in no layer of LAYERS (tests/unit/test_imports.py): add it")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _edges() -> dict[str, set[str]]:
    return GRAPH


def test_the_graph_is_read():
    """The parser finds imports of every kind (top level, inside functions, relative): the test can fail."""
    assert "stoker.errors" in GRAPH["stoker.store.reader"]
    assert {m for m in MODULES if m.startswith("stoker.")} and len(GRAPH) > 100
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_cycle_between_files():
    assert _cycles(_edges()) == []


def test_no_cycle_between_packages():
    packages: dict[str, set[str]] = defaultdict(set)
    for m, targets in _edges().items():
        packages[_unit(m)] |= {_unit(t) for t in targets if _unit(t) != _unit(m)}
    assert _cycles(packages) == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "stoker"))
def test_imports_flow_upwards_only(module):
    here = _unit(module)
    wrong = [
        t for t in sorted(_edges()[module]) if _layer(_unit(t)) > _layer(here) or frozenset({here, _unit(t)}) in APART
    ]
    assert wrong == [], f"{module} imports a higher layer (or one kept apart), see LAYERS: {wrong}"


def test_every_stoker_module_imported_exists():
    """A deferred ``from stoker.x.y import name`` of a module that moved fails only when it runs: here, at once."""
    missing = []
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                targets = [base]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            missing += [f"{module} imports {t}" for t in targets if t.startswith("stoker") and t not in MODULES]
    assert missing == []
