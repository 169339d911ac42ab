"""Printing helpers shared by the commands: sizes, rich tables like the doctor's."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


PIPE_WIDTH = 200  # columns of a console that is not a terminal


def console(file: TextIO | None = None) -> Console:
    """A rich console on ``file`` (stdout): colour only on a terminal; elsewhere no wrapping and no markup.

    Piped output (``stoker inspect X | grep``) keeps each row on one line: a console that is not a
    terminal is wide, and text is never read as rich markup (a column may be named ``[x]``).
    """
    from rich.console import Console

    out = file or sys.stdout
    return Console(
        file=out,
        width=None if out.isatty() else PIPE_WIDTH,
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], file: TextIO | None = None, title: str | None = None
) -> None:
    """A rich table like the doctor's; a column whose every cell is a number is right-aligned."""
    from rich.table import Table

    cells = [[str(c) for c in r] for r in rows]
    t = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        numeric = bool(cells) and all(_is_number(r[i]) for r in cells)
        t.add_column(header, justify="right" if numeric else "left", no_wrap=True)
    for r in cells:
        t.add_row(*r)
    console(file).print(t)


def fields(pairs: Iterable[tuple[str, Any]], file: TextIO | None = None) -> None:
    """Name/value lines, the names in bold and aligned (the head of a command's output)."""
    from rich.text import Text

    lines = [(name, str(value)) for name, value in pairs]
    width = max((len(name) for name, _ in lines), default=0)
    con = console(file)
    for name, value in lines:
        con.print(Text.assemble((name.ljust(width), "bold"), "  ", value))


def _is_number(cell: str) -> bool:
    return cell == "-" or cell.replace(",", "").replace(".", "").replace("x", "").strip().isdigit()
