"""The examples of each kind of text input, one row each: .txt (one example per line), JSONL, CSV/TSV,
a dict of lists, a list of strings, pairs or (text, label) rows.

Bad input is named precisely: invalid UTF-8 raises :class:`~stoker.errors.InputError` with the file,
line and byte (or is replaced with U+FFFD and counted); a missing column names the columns found.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, EmptyDatasetError, InputError
from stoker.text.columns import AUTO, TextColumns
from stoker.text.labels import only

FORMATS = {
    ".txt": "lines",
    ".text": "lines",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
}

NO_LABEL = object()  # an example without a label
BLANK = object()  # a blank line of a JSONL/CSV/TSV file: no example at all, counted as empty


@dataclass
class Bulk:
    """A whole source's examples as columns (:func:`bulk_rows`): where each is, its text, second text
    and raw label (``labels`` None: no label column), and the blank lines that held no example."""

    lines: Sequence[int]  # a range where they are consecutive
    texts: list[str]
    pairs: list[str] | None
    labels: list[Any] | None
    blanks: int = 0


def example_rows(source: Any, columns: TextColumns, replaced: list[int]) -> Iterable[Any]:
    """``(line, text, pair, label)`` per example of ``source`` (``label`` is :data:`NO_LABEL` where there
    is none), or :data:`BLANK` for a blank line of a JSONL/CSV/TSV file; ``replaced[0]`` counts the lines
    whose invalid UTF-8 was replaced."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise InputError(
                f"{path} does not exist or is not a file; give a .txt, .jsonl, .csv or .tsv file "
                "(or, in Python, a list of strings or a dict of columns)",
                path=path,
            )
        fmt = FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise InputError(
                f"{path}: unknown text format {path.suffix!r}; stoker reads {', '.join(sorted(FORMATS))}", path=path
            )
        reader = {"lines": _lines, "jsonl": _jsonl, "csv": _delimited, "tsv": _delimited}[fmt]
        return reader(path, columns, fmt, replaced)
    if isinstance(source, Mapping):
        return _mapping_rows(source, columns)
    if isinstance(source, (list, tuple)):
        return _list_rows(source, columns)
    raise ConfigError(
        f"a text source is a list of strings, a list of (text, text_b) pairs, a dict of columns or a file path, not {type(source).__name__}",
        option="source",
    )


def _decoded(path: Path, columns: TextColumns, replaced: list[int]) -> Iterator[tuple[int, str]]:
    """(line number, text without its newline) for every line; invalid UTF-8 per ``encoding_errors``."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if columns.encoding_errors == "strict":
                    raise InputError(
                        f"{path}, line {number}, byte {exc.start + 1}: invalid UTF-8 ({exc.reason}); fix the file, or pass "
                        "encoding_errors='replace' (--encoding-errors replace) to read it with U+FFFD in place of bad bytes",
                        path=path,
                        line=number,
                    ) from None
                line = raw.decode("utf-8", errors="replace")
                replaced[0] += 1
            yield number, line.rstrip("\r\n")


def _lines(path: Path, columns: TextColumns, fmt: str, replaced: list[int]) -> Iterator[Any]:
    if columns.pair:
        raise ConfigError(
            f"{path}: a .txt file holds one text per line; sentence pairs need JSONL, CSV or TSV", option="pair_column"
        )
    if columns.label not in (None, AUTO):
        raise ConfigError(
            f"{path}: a .txt file has no label column; use JSONL, CSV or TSV for labels", option="label_column"
        )
    for number, line in _decoded(path, columns, replaced):
        yield number, line, None, NO_LABEL


def _pick(
    record: Mapping[str, Any], columns: TextColumns, label: str | None, where: str, found: Iterable[str]
) -> tuple[str, Any, Any]:
    wanted = [columns.text] + ([columns.pair] if columns.pair else []) + ([label] if label else [])
    missing = [c for c in wanted if c not in record]
    if missing:
        raise InputError(
            f"{where}: no column {missing[0]!r}; the columns found are {sorted(found)} (choose with text_column=, pair_column=, label_column=)"
        )
    text = record[columns.text]
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InputError(f"{where}: column {columns.text!r} holds {type(text).__name__}, not text")
    pair = record[columns.pair] if columns.pair else None
    if columns.pair and not isinstance(pair, str):
        pair = "" if pair is None else str(pair)
    return text, pair, record[label] if label else NO_LABEL


def _label_name(columns: TextColumns, found: Iterable[str]) -> str | None:
    if columns.label == AUTO:
        return "label" if "label" in found else None
    return columns.label


def _jsonl(path: Path, columns: TextColumns, fmt: str, replaced: list[int]) -> Iterator[Any]:
    label: str | None | object = NO_LABEL  # the label key, chosen at the first record ("auto")
    first = 0
    for number, line in _decoded(path, columns, replaced):
        if not line.strip():
            yield BLANK
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path}, line {number}, column {exc.colno}: not JSON ({exc.msg}); JSONL holds one object per line",
                path=path,
                line=number,
            ) from None
        if not isinstance(record, dict):
            raise InputError(
                f'{path}, line {number}: a JSONL line must be an object like {{"text": ...}}, not {type(record).__name__}',
                path=path,
                line=number,
            )
        if label is NO_LABEL:
            label, first = _label_name(columns, record), number
        elif label is None and columns.label == AUTO and "label" in record:
            raise InputError(
                f"{path}, line {number} has a 'label' but line {first}, the first, has none, so the file was being "
                "read without labels; pass label_column='label' (--label-column label; every line then needs one) "
                "or label_column=None (--label-column none) to read no labels",
                path=path,
                line=number,
            )
        text, pair, value = _pick(record, columns, label, f"{path}, line {number}", record)  # type: ignore[arg-type]
        yield number, text, pair, value


_EXTRA_FIELDS = {  # why a row may have more fields than its header, and the cure
    "csv": '; a text holding a comma must be quoted ("a, b")',
    "tsv": "; a TSV text cannot hold a tab (TSV has no quoting): replace tabs, or write CSV or JSONL",
}


def _delimited(path: Path, columns: TextColumns, fmt: str, replaced: list[int]) -> Iterator[Any]:
    """Rows of a CSV/TSV file; a record's place is the line it starts on. A TSV line is split at its
    tabs (TSV has no quoting, so no field limit applies). CSV lines go to the csv module with their
    newline, so that a quoted field spanning lines keeps its line breaks (as ``\\n``); its per-field
    limit (128 KiB by default, process-wide) is raised, never lowered, to the file's size, so any
    field the file can hold is read. A malformed record is an InputError naming its line."""
    numbered: list[int] = [0]  # the last line read

    def text_lines() -> Iterator[str]:
        for number, line in _decoded(path, columns, replaced):
            numbered[0] = number
            yield line + "\n"

    reader: Iterator[list[str]]
    if fmt == "tsv":
        reader = (line[:-1].split("\t") if len(line) > 1 else [] for line in text_lines())
    else:
        reader = _csv_records(path, text_lines(), numbered)
    header = next(reader, None)
    if header is None:
        raise EmptyDatasetError(f"{path} is empty; a {fmt.upper()} file starts with a header row naming its columns")
    label = _label_name(columns, header)
    pos = {name: i for i, name in enumerate(header)}
    _pick(dict.fromkeys(header, ""), columns, label, f"{path}, header (line 1)", header)
    wanted = [(columns.text, pos[columns.text])] + ([(columns.pair, pos[columns.pair])] if columns.pair else [])
    label_pos = pos[label] if label else None
    while True:
        start = numbered[0] + 1
        row = next(reader, None)
        if row is None:
            return
        if not row:
            yield BLANK
            continue
        if len(row) != len(header):
            hint = "" if len(row) < len(header) else _EXTRA_FIELDS[fmt]
            raise InputError(
                f"{path}, line {start}: {len(row)} fields, the header has {len(header)} ({header}){hint}",
                path=path,
                line=start,
            )
        text = row[wanted[0][1]]
        pair = row[wanted[1][1]] if columns.pair else None
        yield start, text, pair, row[label_pos] if label_pos is not None else NO_LABEL


def _csv_records(path: Path, lines: Iterator[str], numbered: list[int]) -> Iterator[list[str]]:
    """The csv module's records of ``lines``, its field limit raised to the file's size (2**31 - 1 at
    most); its errors become InputErrors naming the line where the record starts."""
    need = min(path.stat().st_size + 1, 2**31 - 1)
    if csv.field_size_limit() < need:
        csv.field_size_limit(need)
    reader = csv.reader(lines)
    while True:
        start = numbered[0] + 1
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise InputError(
                f"{path}, line {start}: not a CSV record ({exc}); check the quoting from that line on",
                path=path,
                line=start,
            ) from None
        if row is None:
            return
        yield row


def _mapping_rows(source: Mapping[str, Any], columns: TextColumns) -> Iterator[Any]:
    label = _label_name(columns, source)
    _pick(dict.fromkeys(source, ""), columns, label, "the dict of columns", source)
    texts = source[columns.text]
    pairs = source[columns.pair] if columns.pair else None
    labels = plain(source[label]) if label else None
    for name, values in ((columns.pair, pairs), (label, labels)):
        if values is not None and len(values) != len(texts):
            raise InputError(f"column {name!r} has {len(values)} values, column {columns.text!r} has {len(texts)}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"column {columns.text!r}, row {i}: {type(text).__name__}, not text")
        yield i, text, None if pairs is None else str(pairs[i]), NO_LABEL if labels is None else labels[i]


def plain(values: Any) -> list[Any]:
    """A column as a list of Python values: a 1-D numpy array, tensor or pandas Series through its
    ``tolist()`` (one C-level pass; its numpy scalars would each be checked in Python later)."""
    if getattr(values, "ndim", None) == 1 and hasattr(values, "tolist"):
        return values.tolist()
    return list(values)


def _list_rows(source: list[Any] | tuple[Any, ...], columns: TextColumns) -> Iterator[Any]:
    """Rows of a list: strings, ``(text, text_b)`` pairs (two strings) or ``(text, label)`` rows (a
    non-string label), one kind per list (mixing them would misalign the labels)."""
    first: str | None = None
    row: tuple[int, str, str | None, Any]
    for i, item in enumerate(source):
        if isinstance(item, str):
            kind, row = "a single text", (i, item, None, NO_LABEL)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            if isinstance(item[1], str):
                kind, row = "a (text, text_b) pair", (i, item[0], item[1], NO_LABEL)
            else:
                kind, row = "a (text, label) row", (i, item[0], None, NO_LABEL if columns.label is None else item[1])
        else:
            raise InputError(
                f"row {i}: {item!r:.80}; a list source holds strings, (text, text_b) pairs of strings, "
                "or (text, label) rows with numeric labels"
            )
        if first is None:
            first = kind
        elif kind != first:
            raise InputError(f"row {i} is {kind} but row 0 is {first}; a list holds one kind of row")
        if columns.pair and kind != "a (text, text_b) pair":
            raise InputError(f"row {i} is {kind}; with pair_column, sentence pairs come as (text, text_b) tuples")
        if not columns.pair and kind == "a (text, text_b) pair":
            raise InputError(
                f"row {i} is a pair of texts; pass pair_column='text_b' to read sentence pairs. "
                "(text, label) rows take numeric labels; for label names pass a dict of lists "
                "{'text': [...], 'label': [...]}"
            )
        yield row


def bulk_rows(source: Any, columns: TextColumns) -> Bulk | None:
    """The examples of ``source`` as columns, read with a few whole-list operations instead of a
    generator per row, where that gives what :func:`example_rows` gives: a list of strings, a dict
    of columns whose texts are all strings, a .txt or .tsv file that is valid UTF-8 and whose rows
    all have the header's fields. ``None`` otherwise (the row-by-row readers then read it, and say
    what is wrong where)."""
    if isinstance(source, Mapping):
        label = _label_name(columns, source)
        _pick(dict.fromkeys(source, ""), columns, label, "the dict of columns", source)
        texts = source[columns.text]
        pairs = source[columns.pair] if columns.pair else None
        labels = source[label] if label else None
        if not isinstance(texts, (list, tuple)) or not all(v is None or hasattr(v, "__len__") for v in (pairs, labels)):
            return None  # texts in an array, or a generator: read row by row
        sizes = {len(texts), *(len(v) for v in (pairs, labels) if v is not None)}
        if len(sizes) > 1 or not only(texts, str):
            return None
        pairs = None if pairs is None else list(map(str, pairs))
        return Bulk(range(len(texts)), list(texts), pairs, None if labels is None else plain(labels))
    if isinstance(source, (list, tuple)):
        if columns.pair or not only(source, str):
            return None
        return Bulk(range(len(source)), list(source), None, None)
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    fmt = FORMATS.get(path.suffix.lower()) if path.is_file() else None
    if fmt not in ("lines", "tsv") or (fmt == "lines" and (columns.pair or columns.label not in (None, AUTO))):
        return None
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if fmt == "tsv" and data and b"\r" not in data and b"\n\n" not in data and not data.startswith(b"\n"):
        return _flat_tsv(path, data, text, columns)
    lines = text.split("\n") if text else []
    if text.endswith("\n"):
        lines.pop()
    if "\r" in text:
        lines = [line.rstrip("\r") for line in lines]
    if fmt == "lines":
        return Bulk(range(1, len(lines) + 1), lines, None, None)
    return _bulk_tsv(path, lines, columns)


_NOT_SEPARATORS = bytes(b for b in range(256) if b not in b"\t\n")


def _flat_tsv(path: Path, data: bytes, text: str, columns: TextColumns) -> Bulk | None:
    """:func:`bulk_rows` of a TSV file with no blank line and no carriage return: when its tabs and
    newlines alone (one C-level ``translate``) are the header's tabs on every line, the fields of
    every line are one ``split`` of the text, and each column a slice of it (no list per row)."""
    end = text.find("\n")
    header = (text if end < 0 else text[:end]).split("\t")
    label = _label_name(columns, header)
    _pick(dict.fromkeys(header, ""), columns, label, f"{path}, header (line 1)", header)
    width = len(header)
    seps = data.translate(None, _NOT_SEPARATORS)
    seps = seps[:-1] if data.endswith(b"\n") else seps  # the last line's own newline
    lines = seps.count(b"\n") + 1  # the header's included
    row = b"\t" * (width - 1)
    if seps != (row + b"\n") * (lines - 1) + row:
        return None  # a row with another number of fields: read row by row, which names it
    flat = text.replace("\n", "\t").split("\t")
    if text.endswith("\n"):
        flat.pop()
    pos = {name: width + i for i, name in enumerate(header)}  # the first row's fields follow the header's
    pairs = flat[pos[columns.pair] :: width] if columns.pair else None
    labels = flat[pos[label] :: width] if label else None
    return Bulk(range(2, lines + 1), flat[pos[columns.text] :: width], pairs, labels)


def _bulk_tsv(path: Path, lines: list[str], columns: TextColumns) -> Bulk | None:
    """:func:`bulk_rows` of a TSV file's lines (the header first)."""
    if not lines or not lines[0]:
        return None
    header = lines[0].split("\t")
    label = _label_name(columns, header)
    _pick(dict.fromkeys(header, ""), columns, label, f"{path}, header (line 1)", header)
    pos = {name: i for i, name in enumerate(header)}
    body = lines[1:]
    rows = [line.split("\t") for line in body if line]
    if any(len(row) != len(header) for row in rows):
        return None
    numbers = list(range(2, len(body) + 2))
    if len(rows) < len(body):
        numbers = [n for n, line in zip(numbers, body) if line]
    at = pos[columns.text]
    pairs = [row[pos[columns.pair]] for row in rows] if columns.pair else None
    labels = [row[pos[label]] for row in rows] if label else None
    return Bulk(numbers, [row[at] for row in rows], pairs, labels, len(body) - len(rows))
