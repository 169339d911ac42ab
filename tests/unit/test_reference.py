"""The reference pages (docs/reference/knobs.md, cli.md, api.md) are what scripts/gen_reference.py writes from
the code now, every public name, keyword and ``STOKER_*`` variable on them is documented, and every
``STOKER_*`` variable src/ reads goes through the registry (``stoker/settings.py``)."""

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


def test_the_pages_are_what_the_code_says_now():
    for page, text in _generator().pages().items():
        assert page.read_text(encoding="utf-8") == text, f"{page} is stale: run scripts/gen_reference.py"


def _rows(page: str) -> list[tuple[str, list[str]]]:
    """The table rows of ``page`` that name a keyword or variable: (name, the other cells), in page order."""
    out = []
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| `"):
            out.append((cells[0].strip("`"), cells[1:]))
    return out


def test_every_keyword_and_variable_has_a_meaning_on_the_page():
    """A keyword of the loaders or a ``STOKER_*`` variable added without a docstring entry fails here."""
    rows = _rows(_generator().render())
    meaning = {True: 1, False: -1}  # a variable's row: default, meaning, read by; a keyword's: default, meaning
    missing = [n for n, cells in rows if len(cells) < 2 or cells[meaning[n.startswith("STOKER_")]] in ("", "—")]
    assert missing == [], "document these in the docstrings' Attributes:/Args: sections or stoker/settings.py"
    assert {n for n, _ in rows if n.startswith("STOKER_")} == set(SETTINGS)
    assert len(rows) > 50


def test_every_public_name_is_on_the_api_page_with_a_docstring():
    """A public name (``__all__`` of stoker and its public subpackages) added without a docstring fails here."""
    import importlib
    import inspect

    gen = _generator()
    page = gen.render_api()
    undocumented, absent = [], []
    for module_name, names in gen.api_names().items():
        module = importlib.import_module(module_name)
        for name in names:
            obj = getattr(module, name)
            if not any(f"::: {m}.{name}\n" in page for m in (module_name, getattr(obj, "__module__", ""))):
                absent.append(f"{module_name}.{name}")
            if (inspect.isclass(obj) or inspect.isroutine(obj)) and not (obj.__doc__ or "").strip():
                undocumented.append(f"{module_name}.{name}")
    assert absent == [] and undocumented == []
    import stoker

    modules = {f"stoker.{n}" for n in stoker.__all__ if inspect.ismodule(getattr(stoker, n))}
    assert modules <= set(gen.API_MODULES), "a public subpackage missing from API_MODULES (scripts/gen_reference.py)"
    assert set(gen.api_names()["stoker"]) >= {"Loader", "Store", "write", "open", "StokerError"}


def test_every_cli_command_and_flag_is_on_the_cli_page():
    import argparse

    from stoker.cli.main import build_parser

    page = _generator().render_cli()
    seen = []

    def walk(parser: argparse.ArgumentParser, title: str) -> None:
        seen.append(title)
        assert f"`{title}`" in page
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{title} {name}")
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                assert f"`{action.option_strings[0]}`" in page, (title, action.option_strings)

    walk(build_parser(), "stoker")
    assert {"stoker convert images", "stoker doctor", "stoker tune"} <= set(seen)


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
