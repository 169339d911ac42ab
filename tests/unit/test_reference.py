"""The one page of knobs (docs/reference/knobs.md) is what scripts/gen_reference.py writes from the code now,
and every ``STOKER_*`` variable src/ reads goes through the registry (``stoker/settings.py``)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from stoker.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "stoker"
NAME = re.compile(r"STOKER_[A-Z0-9_]+")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_what_the_code_says_now():
    gen = _generator()
    assert gen.PAGE.read_text(encoding="utf-8") == gen.render(), (
        "docs/reference/knobs.md is stale: run scripts/gen_reference.py"
    )


def test_the_page_names_every_variable_and_keyword():
    """The page holds what the registry and the signatures hold (the generator reads them, not a copy)."""
    import stoker

    page = _generator().render()
    assert all(f"`{name}`" in page for name in SETTINGS)
    assert all(f"| `{f}` |" in page for f in stoker.LoaderConfig.names())
    assert "| `label_column` | `'auto'` |" in page and "| `decode_device` | `'cpu'` |" in page


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _env_keys(tree: ast.AST) -> list[ast.AST]:
    """The key expressions of every read of the environment: ``os.environ.get(K)``, ``os.environ[K]``,
    ``K in os.environ``, ``os.getenv(K)``."""
    keys: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            if isinstance(f, ast.Attribute) and (
                (f.attr in ("get", "pop", "setdefault") and _is_environ(f.value)) or f.attr == "getenv"
            ):
                keys.append(node.args[0])
            elif isinstance(f, ast.Name) and f.id == "getenv":
                keys.append(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            keys.append(node.slice)
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            keys.append(node.left)
    return keys


def _sources() -> dict[str, ast.AST]:
    return {p.relative_to(PACKAGE).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.py")}


def _constants(trees: dict[str, ast.AST]) -> dict[str, str]:
    """Module-level ``NAME = "STOKER_..."`` of every module: the names a read may use for its key."""
    out = {}
    for tree in trees.values():
        for node in getattr(tree, "body", []):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                value = node.value.value
                if isinstance(value, str) and NAME.fullmatch(value):
                    out.update({t.id: value for t in node.targets if isinstance(t, ast.Name)})
    return out


def _key(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Attribute):
        return constants.get(node.attr)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant)) + "*"
    return None


def test_src_reads_stoker_variables_only_through_the_registry():
    trees = _sources()
    constants = _constants(trees)
    wrong = [
        f"{path}:{node.lineno}: {key}"
        for path, tree in trees.items()
        if path != "settings.py"
        for node in _env_keys(tree)
        if (key := _key(node, constants)) is not None and key.startswith("STOKER_")
    ]
    assert wrong == [], "read these through stoker.settings.env (and register them there)"


def test_every_stoker_variable_named_in_src_is_registered():
    trees = _sources()
    named = {
        (path, node.value)
        for path, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value)
    }
    assert sorted(n for n in named if n[1] not in SETTINGS) == []


def test_the_checks_see_a_read():
    tree = ast.parse('import os\nX = "STOKER_X"\nos.environ.get(X)\nos.getenv("STOKER_Y")\n"STOKER_Z" in os.environ\n')
    constants = _constants({"m": tree})
    assert sorted(_key(k, constants) for k in _env_keys(tree)) == ["STOKER_X", "STOKER_Y", "STOKER_Z"]
