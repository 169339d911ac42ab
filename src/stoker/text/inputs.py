"""Where texts come from: Python lists, .txt (one example per line), JSONL, CSV and TSV.

:func:`iter_blocks` reads a source as a stream of :class:`TextBlock` (a few thousand examples
each, with their line numbers), so a conversion never holds a large file in memory;
:func:`read_table` collects the blocks into one :class:`TextTable` for loading on the fly.

Bad input is named precisely: invalid UTF-8 raises :class:`~stoker.errors.InputError` with
the file, line and byte (or is replaced with U+FFFD and counted, ``encoding_errors="replace"``);
a missing column names the columns found; empty texts are skipped and counted, or kept
(``keep_empty=True``).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, EmptyDatasetError, InputError
from stoker.text.labels import LabelCoder, label_map

FORMATS = {
    ".txt": "lines",
    ".text": "lines",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
}
BLOCK_ROWS = 8192
AUTO = "auto"


@dataclass(frozen=True)
class TextColumns:
    """Which fields hold what, and what to do with bad lines.

    Attributes:
        text: the text column (JSONL/CSV/TSV) or key (a dict of lists).
        pair: the second text of sentence pairs (``None``: single texts).
        label: the label column; ``"auto"`` takes ``label`` when there is one, ``None`` reads no label.
        keep_empty: keep empty (whitespace-only) texts instead of skipping them.
        encoding_errors: ``"strict"`` (invalid UTF-8 raises InputError) or ``"replace"``.
        label_names: label names in id order (a label outside them is an InputError naming its
            line); ``None``: names are numbered in sorted order, numbers stay numbers.
    """

    text: str = "text"
    pair: str | None = None
    label: str | None = AUTO
    keep_empty: bool = False
    encoding_errors: str = "strict"
    label_names: tuple[str, ...] | None = None

    @classmethod
    def of(
        cls,
        text_column: str = "text",
        pair_column: str | None = None,
        label_column: str | None = AUTO,
        keep_empty: bool = False,
        encoding_errors: str = "strict",
        label_names: Any = None,
        class_to_idx: Any = None,
    ) -> TextColumns:
        """From the user-facing keywords (``label_names=`` and/or ``class_to_idx=`` give the label map)."""
        names = label_map(label_names, class_to_idx)
        return cls(text_column, pair_column, label_column, keep_empty, encoding_errors, names)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text:
            raise ConfigError(f"text_column must be a column name, got {self.text!r}", option="text_column")
        if self.encoding_errors not in ("strict", "replace"):
            raise ConfigError(
                f"encoding_errors must be 'strict' or 'replace', not {self.encoding_errors!r}", option="encoding_errors"
            )


@dataclass
class TextBlock:
    """Consecutive examples of a source: texts, optional second texts and raw labels, and where
    each example is (``lines``: the file's 1-based line, or the 0-based row of a list or dict)."""

    texts: list[str]
    pairs: list[str] | None = None
    labels: list[Any] | None = None
    skipped_empty: int = 0
    replaced_lines: int = 0
    lines: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TextTable:
    """A whole source in memory, labels coded as numbers; ``lines`` says where each example is."""

    texts: list[str]
    pairs: list[str] | None
    labels: np.ndarray | None
    label_names: tuple[str, ...] | None
    origin: str
    skipped_empty: int = 0
    replaced_lines: int = 0
    lines: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def describe(self, row: int) -> str:
        """Where example ``row`` came from: ``"corpus.tsv, line 12"`` or ``"row 12 of a list ..."``."""
        line = int(row if self.lines is None else self.lines[row])
        return where_is(self.origin, line)


def where_is(origin: str, line: int) -> str:
    """``origin`` and the place in it: the line of a file, the row of a list or dict (``describe_source``)."""
    return f"row {line} of {origin}" if origin.startswith("a ") else f"{origin}, line {line}"


def row_unit(source: Any) -> str:
    """What a place in ``source`` is called: a file's ``line``, a list's or dict's ``row``."""
    return "line" if isinstance(source, (str, os.PathLike)) else "row"


def describe_source(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    return (
        f"a {type(source).__name__} of {len(source)} examples" if hasattr(source, "__len__") else type(source).__name__
    )


def iter_blocks(source: Any, columns: TextColumns = TextColumns(), block_rows: int = BLOCK_ROWS) -> Iterator[TextBlock]:
    """The source as blocks of at most ``block_rows`` examples (empty texts already handled)."""
    replaced = [0]  # lines whose invalid UTF-8 was replaced, counted by the file readers
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise InputError(
                f"{path} does not exist or is not a file; pass a .txt, .jsonl, .csv or .tsv file, or a list of strings",
                path=path,
            )
        fmt = FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise InputError(
                f"{path}: unknown text format {path.suffix!r}; stoker reads {', '.join(sorted(FORMATS))}", path=path
            )
        reader = {"lines": _lines, "jsonl": _jsonl, "csv": _delimited, "tsv": _delimited}[fmt]
        rows: Iterable[Any] = reader(path, columns, fmt, replaced)
    elif isinstance(source, Mapping):
        rows = _mapping_rows(source, columns)
    elif isinstance(source, (list, tuple)):
        rows = _list_rows(source, columns)
    else:
        raise ConfigError(
            f"a text source is a list of strings, a list of (text, text_b) pairs, a dict of columns or a file path, not {type(source).__name__}",
            option="source",
        )
    block = TextBlock([], [] if columns.pair else None, None)
    for row in rows:
        if row is _BLANK:
            block.skipped_empty += 1
            continue
        _, text, pair, label = row
        if not columns.keep_empty and not text.strip():
            block.skipped_empty += 1
            continue
        block.texts.append(text)
        block.lines.append(row[0])
        if block.pairs is not None:
            block.pairs.append(pair)
        if label is not _NO_LABEL:
            if block.labels is None:
                block.labels = []
            block.labels.append(label)
        if len(block.texts) >= block_rows:
            block.replaced_lines, replaced[0] = replaced[0], 0
            yield block
            block = TextBlock([], [] if columns.pair else None, None)
    block.replaced_lines = replaced[0]
    if block.texts or block.skipped_empty or block.replaced_lines:
        yield block


def read_table(source: Any, columns: TextColumns = TextColumns()) -> TextTable:
    """The whole source in memory (labels coded: see :mod:`stoker.text.labels`), for loading on the fly."""
    texts: list[str] = []
    pairs: list[str] | None = [] if columns.pair else None
    raw: list[Any] = []
    has_labels = False
    lines: list[int] = []
    skipped = replaced = 0
    for block in iter_blocks(source, columns):
        texts.extend(block.texts)
        lines.extend(block.lines)
        if pairs is not None and block.pairs is not None:
            pairs.extend(block.pairs)
        if block.labels is not None:
            has_labels = True
            raw.extend(block.labels)
        skipped += block.skipped_empty
        replaced += block.replaced_lines
    where = describe_source(source)
    if not texts:
        raise EmptyDatasetError(f"{where} holds no text ({skipped} empty lines skipped; keep_empty=True keeps them)")
    label_array, names = None, None
    if has_labels:
        coder = LabelCoder.fit(raw, where, columns.label_names)
        label_array, names = coder.encode(raw, lines, where, row_unit(source)), coder.label_names
    elif columns.label_names is not None:
        raise ConfigError(
            f"label_names/class_to_idx were given but {where} has no labels (label_column={columns.label!r})",
            option="label_names",
        )
    return TextTable(texts, pairs, label_array, names, where, skipped, replaced, np.asarray(lines, dtype=np.int64))


def scan_labels(source: Any, columns: TextColumns) -> LabelCoder | None:
    """The label coder of a whole source, read once without keeping its texts (a conversion's first pass).

    ``None`` when the source has no labels. With a given map the source is not read.
    """
    if columns.label_names is not None:
        return LabelCoder(columns.label_names, given=True)
    raw: list[Any] = []
    found = False
    for block in iter_blocks(source, columns):
        if block.labels is not None:
            found = True
            raw.extend(block.labels)
    return LabelCoder.fit(raw, describe_source(source)) if found else None


_NO_LABEL = object()
_BLANK = object()  # a blank line of a JSONL/CSV/TSV file: no example at all, counted as empty


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
        yield number, line, None, _NO_LABEL


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
    return text, pair, record[label] if label else _NO_LABEL


def _label_name(columns: TextColumns, found: Iterable[str]) -> str | None:
    if columns.label == AUTO:
        return "label" if "label" in found else None
    return columns.label


def _jsonl(path: Path, columns: TextColumns, fmt: str, replaced: list[int]) -> Iterator[Any]:
    label: str | None | object = _NO_LABEL
    for number, line in _decoded(path, columns, replaced):
        if not line.strip():
            yield _BLANK
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
        if label is _NO_LABEL:
            label = _label_name(columns, record)
        text, pair, value = _pick(record, columns, label, f"{path}, line {number}", record)  # type: ignore[arg-type]
        yield number, text, pair, value


def _delimited(path: Path, columns: TextColumns, fmt: str, replaced: list[int]) -> Iterator[Any]:
    numbered: list[int] = [0]

    def text_lines() -> Iterator[str]:
        for number, line in _decoded(path, columns, replaced):
            numbered[0] = number
            yield line

    if fmt == "tsv":
        reader = csv.reader(text_lines(), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(text_lines())
    header = next(reader, None)
    if header is None:
        raise EmptyDatasetError(f"{path} is empty; a {fmt.upper()} file starts with a header row naming its columns")
    label = _label_name(columns, header)
    pos = {name: i for i, name in enumerate(header)}
    _pick(dict.fromkeys(header, ""), columns, label, f"{path}, header (line 1)", header)
    wanted = [(columns.text, pos[columns.text])] + ([(columns.pair, pos[columns.pair])] if columns.pair else [])
    label_pos = pos[label] if label else None
    for row in reader:
        if not row:
            yield _BLANK
            continue
        if len(row) < len(header):
            raise InputError(
                f"{path}, line {numbered[0]}: {len(row)} fields, the header has {len(header)} ({header})",
                path=path,
                line=numbered[0],
            )
        text = row[wanted[0][1]]
        pair = row[wanted[1][1]] if columns.pair else None
        yield numbered[0], text, pair, row[label_pos] if label_pos is not None else _NO_LABEL


def _mapping_rows(source: Mapping[str, Any], columns: TextColumns) -> Iterator[Any]:
    label = _label_name(columns, source)
    _pick(dict.fromkeys(source, ""), columns, label, "the dict of columns", source)
    texts = source[columns.text]
    pairs = source[columns.pair] if columns.pair else None
    labels = source[label] if label else None
    for name, values in ((columns.pair, pairs), (label, labels)):
        if values is not None and len(values) != len(texts):
            raise InputError(f"column {name!r} has {len(values)} values, column {columns.text!r} has {len(texts)}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"column {columns.text!r}, row {i}: {type(text).__name__}, not text")
        yield i, text, None if pairs is None else str(pairs[i]), _NO_LABEL if labels is None else labels[i]


def _list_rows(source: list[Any] | tuple[Any, ...], columns: TextColumns) -> Iterator[Any]:
    """Rows of a list: strings, ``(text, text_b)`` pairs (two strings) or ``(text, label)`` rows (a
    non-string label), one kind per list (mixing them would misalign the labels)."""
    first: str | None = None
    row: tuple[int, str, str | None, Any]
    for i, item in enumerate(source):
        if isinstance(item, str):
            kind, row = "a single text", (i, item, None, _NO_LABEL)
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            if isinstance(item[1], str):
                kind, row = "a (text, text_b) pair", (i, item[0], item[1], _NO_LABEL)
            else:
                kind, row = "a (text, label) row", (i, item[0], None, _NO_LABEL if columns.label is None else item[1])
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


__all__ = [
    "FORMATS",
    "TextBlock",
    "TextColumns",
    "TextTable",
    "describe_source",
    "iter_blocks",
    "read_table",
    "row_unit",
    "scan_labels",
    "where_is",
]
