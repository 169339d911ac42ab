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
    """

    text: str = "text"
    pair: str | None = None
    label: str | None = AUTO
    keep_empty: bool = False
    encoding_errors: str = "strict"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text:
            raise ConfigError(f"text_column must be a column name, got {self.text!r}", option="text_column")
        if self.encoding_errors not in ("strict", "replace"):
            raise ConfigError(
                f"encoding_errors must be 'strict' or 'replace', not {self.encoding_errors!r}", option="encoding_errors"
            )


@dataclass
class TextBlock:
    """Consecutive examples of a source: texts, optional second texts and raw labels."""

    texts: list[str]
    pairs: list[str] | None = None
    labels: list[Any] | None = None
    skipped_empty: int = 0
    replaced_lines: int = 0


@dataclass(frozen=True)
class TextTable:
    """A whole source in memory, labels coded as numbers."""

    texts: list[str]
    pairs: list[str] | None
    labels: np.ndarray | None
    label_names: tuple[str, ...] | None
    origin: str
    skipped_empty: int = 0
    replaced_lines: int = 0

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class LabelCoder:
    """Labels to numbers: integers stay integers, floats floats, names get codes by first appearance."""

    names: dict[str, int] = field(default_factory=dict)
    kind: str | None = None  # "int", "float" or "name"

    def encode(self, values: list[Any], where: str) -> np.ndarray:
        kinds = {_label_kind(v) for v in values}
        if self.kind is not None:
            kinds.add(self.kind)
        if "int" in kinds and "float" in kinds:
            kinds.discard("int")
        if len(kinds) > 1:
            raise InputError(f"{where}: labels mix numbers and names ({sorted(kinds)}); use one kind of label")
        self.kind = kinds.pop() if kinds else self.kind
        if self.kind == "name":
            return np.fromiter(
                (self.names.setdefault(str(v), len(self.names)) for v in values), dtype=np.int64, count=len(values)
            )
        dtype = np.float32 if self.kind == "float" else np.int64
        return np.asarray([float(v) if self.kind == "float" else int(v) for v in values], dtype=dtype)

    @property
    def label_names(self) -> tuple[str, ...] | None:
        return tuple(self.names) if self.kind == "name" else None


def _label_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "name"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if value is None:
        raise InputError("a label is missing (null); every example needs one, or read no labels (label_column=None)")
    text = str(value).strip()
    if text.lstrip("+-").isdigit():
        return "int"
    return "name"


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
    """The whole source in memory (labels coded), for loading on the fly."""
    texts: list[str] = []
    pairs: list[str] | None = [] if columns.pair else None
    labels: list[np.ndarray] = []
    coder = LabelCoder()
    skipped = replaced = 0
    for block in iter_blocks(source, columns):
        texts.extend(block.texts)
        if pairs is not None and block.pairs is not None:
            pairs.extend(block.pairs)
        if block.labels is not None:
            labels.append(coder.encode(block.labels, describe_source(source)))
        skipped += block.skipped_empty
        replaced += block.replaced_lines
    if not texts:
        raise EmptyDatasetError(
            f"{describe_source(source)} holds no text ({skipped} empty lines skipped; keep_empty=True keeps them)"
        )
    label_array = np.concatenate(labels) if labels else None
    return TextTable(texts, pairs, label_array, coder.label_names, describe_source(source), skipped, replaced)


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
    for i, item in enumerate(source):
        if isinstance(item, str):
            if columns.pair:
                raise InputError(f"row {i} is a single text; sentence pairs come as (text, text_b) tuples")
            yield i, item, None, _NO_LABEL
        elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(t, str) for t in item):
            if not columns.pair:
                raise InputError(f"row {i} is a pair of texts; pass pairs=True (or pair_column) to read sentence pairs")
            yield i, item[0], item[1], _NO_LABEL
        else:
            raise InputError(f"row {i}: {type(item).__name__}; a list source holds strings, or (text, text_b) pairs")


__all__ = [
    "FORMATS",
    "LabelCoder",
    "TextBlock",
    "TextColumns",
    "TextTable",
    "describe_source",
    "iter_blocks",
    "read_table",
]
