"""Write docs/reference/knobs.md, the one page of stoker's knobs, from the code.

Every ``STOKER_*`` environment variable (``stoker/settings.py``) and every keyword of ``stoker.Loader``,
``stoker.text.Loader`` and ``stoker.vision.ImageSource``, each with its default and its meaning. The
keywords come from the signatures and the config dataclasses' fields (``LoaderConfig``, ``TextConfig``,
``TextColumns.of``, ``ImageOptions``); the meanings from their docstrings' ``Attributes:`` and ``Args:``
sections. Nothing is copied by hand: ``tests/unit/test_reference.py`` fails when the page differs from
what this script writes now.

Run: ``PYTHONPATH=src python scripts/gen_reference.py`` (``--check``: exit 1 if the page is stale).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "knobs.md"
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


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        stale = not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != text
        if stale:
            sys.stderr.write(f"{PAGE} is stale: run scripts/gen_reference.py\n")
        return int(stale)
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
