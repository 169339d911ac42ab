"""Write the reference pages of docs/reference/ from the code: knobs.md, cli.md and api.md.

knobs.md is the one page of stoker's knobs.
Every ``STOKER_*`` environment variable (``stoker/settings.py``) and every keyword of ``stoker.Loader``,
``stoker.text.Loader`` and ``stoker.vision.ImageSource``, each with its default and its meaning. The
keywords come from the signatures and the config dataclasses' fields (``LoaderConfig``, ``TextConfig``,
``TextColumns.of``, ``ImageOptions``); the meanings from their docstrings' ``Attributes:`` and ``Args:``
sections. cli.md is every ``stoker`` command and flag, read from the argparse parser
(``stoker.cli.main.build_parser``). api.md is one mkdocstrings block per public name: ``stoker.__all__``
and the ``__all__`` of each public subpackage (:data:`API_MODULES`); mkdocstrings renders them from the
docstrings when the site is built. Nothing is copied by hand: ``tests/unit/test_reference.py`` fails when
a page differs from what this script writes now.

Run: ``PYTHONPATH=src python scripts/gen_reference.py`` (``--check``: exit 1 if a page is stale).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference"
PAGE = REFERENCE / "knobs.md"
CLI_PAGE = REFERENCE / "cli.md"
API_PAGE = REFERENCE / "api.md"
API_MODULES = ("stoker", "stoker.errors", "stoker.sources", "stoker.convert", "stoker.convert.on_ray", "stoker.text")
API_MODULES += ("stoker.vision", "stoker.tune", "stoker.remote", "stoker.lightning", "stoker.doctor")
_ENTRY = re.compile(r"^(\s*)(\*{0,2}[A-Za-z_][\w, *]*):\s?(.*)$")


def doc_section(obj: Any, title: str) -> dict[str, str]:
    """``name -> meaning`` from the ``Attributes:``/``Args:`` section of ``obj``'s docstring.

    An entry names one keyword or several (``batch_size, shuffle: ...``); its continuation lines are
    indented deeper. Several names share the meaning.
    """
    lines = inspect.cleandoc(obj.__doc__ or "").splitlines()
    out: dict[str, str] = {}
    try:
        start = lines.index(f"{title}:") + 1
    except ValueError:
        return out
    names: list[str] = []
    indent = None
    pending = ""  # the first line of names that go on to the next line (``a, b,``)
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break  # the section ended
        depth = len(line) - len(line.lstrip())
        match = _ENTRY.match(pending + line.strip())
        if match and (indent is None or depth <= indent):
            indent, pending = depth, ""
            names = [n.strip().lstrip("*") for n in match.group(2).split(",") if n.strip()]
            for n in names:
                out[n] = match.group(3).strip()
        elif depth == indent and line.rstrip().endswith(","):
            pending += line.strip() + " "
        elif line.strip() and names:
            for n in names:
                out[n] = f"{out[n]} {line.strip()}".strip()
    return out


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if value is dataclasses.MISSING:
        return "required"
    text = repr(value)
    return "not given" if text == "UNSET" else f"`{text}`"


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _cell(text: str) -> str:
    """One table cell in Markdown: reST roles and double backquotes made plain code."""
    text = re.sub(
        r":\w+:`~?([^`]*)`", lambda m: f"`{m.group(1).split('.')[-1] if '~' in m.group(0) else m.group(1)}`", text
    )
    text = text.replace("``", "`")
    return " ".join(text.split()).replace("|", "\\|") or "—"


def _params(fn: Any) -> list[inspect.Parameter]:
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self" and p.kind not in skip]


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    out = ["| keyword | default | meaning |", "| --- | --- | --- |"]
    out += [f"| `{name}` | {_cell(default)} | {_cell(meaning)} |" for name, default, meaning in rows]
    return out


def _signature_rows(fn: Any, *docs: dict[str, str]) -> list[tuple[str, str, str]]:
    rows = []
    for p in _params(fn):
        meaning = next((d[p.name] for d in docs if p.name in d), "")
        rows.append((p.name, _default(p.default), meaning))
    return rows


def _field_rows(cls: Any, skip: set[str], docs: dict[str, str]) -> list[tuple[str, str, str]]:
    return [
        (f.name, _default(_field_default(f)), docs.get(f.name, ""))
        for f in dataclasses.fields(cls)
        if f.name not in skip and not f.name.startswith("_")
    ]


def loader_section() -> list[str]:
    import stoker

    fields = doc_section(stoker.LoaderConfig, "Attributes")
    rows = _signature_rows(stoker.Loader.__init__, fields, doc_section(stoker.Loader, "Args"))
    given = {name for name, _, _ in rows}
    rows += _field_rows(stoker.LoaderConfig, given, fields)
    return [
        "## `stoker.Loader`",
        "",
        "The signature's keywords, then the fields of `stoker.LoaderConfig` it takes as `**options`.",
        "",
        *_table(rows),
    ]


def text_section() -> list[str]:
    import stoker.labels
    import stoker.text
    from stoker.text.columns import TextColumns
    from stoker.text.loader import TextConfig, loader_options

    config = doc_section(TextConfig, "Attributes")
    rows = _signature_rows(stoker.text.Loader.__init__, config, doc_section(stoker.text.Loader, "Args"))
    given = {name for name, _, _ in rows}
    rows += _field_rows(TextConfig, given | {"inputs"}, config)
    columns = doc_section(TextColumns, "Attributes")
    label_map = " ".join(inspect.getdoc(stoker.labels.label_map).split())  # class_to_idx: not a field of its own
    for p in _params(TextColumns.of):
        rows.append((p.name, _default(p.default), columns.get(p.name.removesuffix("_column"), label_map)))
    passed = sorted(loader_options() - given - {name for name, _, _ in rows})
    return [
        "## `stoker.text.Loader`",
        "",
        "The signature's keywords, the fields of `TextConfig`, and the input keywords of `TextColumns.of`;",
        "besides these it passes on these keywords of `stoker.Loader` (same defaults and meanings): "
        + ", ".join(f"`{n}`" for n in passed)
        + ".",
        "",
        *_table(rows),
    ]


def vision_section() -> list[str]:
    from stoker.vision import ImageOptions, ImageSource

    options = doc_section(ImageOptions, "Attributes")
    rows = _signature_rows(ImageSource.__init__, doc_section(ImageSource, "Args"), options)
    rows += _field_rows(ImageOptions, {name for name, _, _ in rows}, options)
    return [
        "## `stoker.vision.ImageSource`",
        "",
        "The signature's keywords, then the fields of `stoker.vision.ImageOptions` it takes as `**options`.",
        "",
        *_table(rows),
    ]


def env_section() -> list[str]:
    from stoker.settings import SETTINGS

    out = ["## Environment variables", ""]
    out += ["Read when the code that needs them runs, never at import (`stoker/settings.py`).", ""]
    for internal, title in ((False, "For users"), (True, "Internal: set by stoker for the Python it starts")):
        out += [f"### {title}", "", "| variable | default | meaning | read by |", "| --- | --- | --- | --- |"]
        out += [
            f"| `{s.name}` | {_cell(s.default)} | {_cell(s.meaning)} | {_cell(s.readers)} |"
            for s in SETTINGS.values()
            if s.internal == internal
        ]
        out.append("")
    return out[:-1]


def render() -> str:
    head = [
        "# stoker's knobs",
        "",
        "<!-- generated by scripts/gen_reference.py from the code: edit the docstrings or stoker/settings.py, "
        "then run it -->",
        "",
        "Every environment variable stoker reads and every keyword of its three entry points, with its",
        "default and meaning.",
        "",
    ]
    sections = [env_section(), loader_section(), text_section(), vision_section()]
    return "\n".join(head + [line for s in sections for line in [*s, ""]]).rstrip() + "\n"


def _help(action: Any) -> str:
    import argparse

    if action.help in (None, argparse.SUPPRESS):
        return ""
    text = action.help % {"default": action.default, "prog": ""} if "%" in action.help else action.help
    return text


def _flag(action: Any) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0 and action.metavar is not None:
            names += f" `{action.metavar}`"
        elif action.nargs != 0:
            names += f" `{action.dest.upper()}`"
        return names
    return f"`{action.metavar or action.dest}`"


def _parser_section(parser: Any, title: str, level: str) -> list[str]:
    import argparse

    out = [f"{level} `{title}`", ""]
    if parser.description:
        out += [" ".join(parser.description.split()), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [a for a in parser._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if rows:
        out += ["| argument | default | meaning |", "| --- | --- | --- |"]
        for a in rows:
            default = "—" if a.default in (None, argparse.SUPPRESS) or a.required else f"`{a.default!r}`"
            out.append(f"| {_flag(a)} | {default} | {_cell(_help(a))} |")
        out.append("")
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                out += _parser_section(sub, f"{title} {name}", level + "#")
    return out


def render_cli() -> str:
    """docs/reference/cli.md: every command, its usage and every flag with its default and help."""
    import os

    from stoker.cli.main import build_parser

    os.environ.setdefault("COLUMNS", "100")  # argparse wraps the usage to the terminal's width
    parser = build_parser()
    parser.prog = "stoker"
    head = [
        "# Command line",
        "",
        "<!-- generated by scripts/gen_reference.py from stoker.cli.main.build_parser: edit the parsers' help, "
        "then run it -->",
        "",
        "Every `stoker` command and flag, as `stoker COMMAND --help` prints them. Exit codes: 0 success, 1 a",
        "stoker error (the message names the file, the flag and what to do), 2 bad arguments, 130 interrupted.",
        "",
    ]
    return "\n".join(head + _parser_section(parser, "stoker", "##")).rstrip() + "\n"


def api_names() -> dict[str, list[str]]:
    """module -> its public names that are not modules (``__all__``), in the order given."""
    import importlib

    out = {}
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", [])
        out[module_name] = [n for n in names if not inspect.ismodule(getattr(module, n)) and n != "__version__"]
    return out


def render_api() -> str:
    """docs/reference/api.md: a mkdocstrings block for each public name, grouped by module."""
    import importlib

    out = [
        "# Python API",
        "",
        "<!-- generated by scripts/gen_reference.py from each module's __all__: edit the docstrings, then run it -->",
        "",
        "Every public name of `stoker` and of its subpackages, rendered from the docstrings. The keywords",
        "with their defaults in one table: [knobs](knobs.md).",
        "",
    ]
    for module_name, names in api_names().items():
        out += [f"## `{module_name}`", ""]
        module = importlib.import_module(module_name)
        for name in names:
            # a name the module makes on first use (a module __getattr__) is documented where it is defined
            where = module_name if name in vars(module) else getattr(module, name).__module__
            out += [f"::: {where}.{name}", ""]
    return "\n".join(out).rstrip() + "\n"


def pages() -> dict[Path, str]:
    return {PAGE: render(), CLI_PAGE: render_cli(), API_PAGE: render_api()}


def main(argv: list[str]) -> int:
    stale = []
    for page, text in pages().items():
        if "--check" in argv:
            if not page.is_file() or page.read_text(encoding="utf-8") != text:
                stale.append(page)
            continue
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
    if stale:
        sys.stderr.write(f"{', '.join(map(str, stale))} stale: run scripts/gen_reference.py\n")
    return int(bool(stale))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
