"""Where texts come from: Python lists, .txt (one example per line), JSONL, CSV and TSV.

:func:`iter_blocks` reads a source as a stream of :class:`TextBlock` (a few thousand examples
each, with their line numbers), so a conversion never holds a large file in memory;
:func:`read_table` collects them into one :class:`TextTable` for loading on the fly. The rows of
each input kind are read in :mod:`stoker.text.rows`. Empty texts are kept (an empty sequence), or
skipped with a warning naming the first lines and counted (``keep_empty=False``); a blank line of
a JSONL/CSV/TSV file holds no example (as pandas and HF datasets read it) and is counted the same way.
"""

from __future__ import annotations

import itertools
import operator
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from stoker.errors import ConfigError, EmptyDatasetError
from stoker.text.columns import AUTO, TextColumns
from stoker.text.labels import LabelCoder
from stoker.text.rows import BLANK, FORMATS, NO_LABEL, Bulk, bulk_rows, example_rows

BLOCK_ROWS = 8192
WARNED_LINES = 5  # keep_empty=False: the first lines skipped, named in the warning
DEFAULT_COLUMNS = TextColumns()  # a text column named text, a label column named label if present


@dataclass
class TextBlock:
    """Consecutive examples of a source: texts, optional second texts and raw labels, and where
    each example is (``lines``: the file's 1-based line, or the 0-based row of a list or dict)."""

    texts: list[str]
    pairs: list[str] | None = None
    labels: list[Any] | None = None
    skipped_empty: int = 0
    replaced_lines: int = 0
    lines: Sequence[int] | np.ndarray = field(default_factory=list)  # a range where they are consecutive


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


def iter_blocks(
    source: Any, columns: TextColumns = DEFAULT_COLUMNS, block_rows: int = BLOCK_ROWS, warn: bool = True
) -> Iterator[TextBlock]:
    """The source as blocks of at most ``block_rows`` examples (empty texts already handled: with
    ``keep_empty=False`` skipped, and the first :data:`WARNED_LINES` of them named in one warning at
    the end when ``warn``)."""
    replaced = [0]  # lines whose invalid UTF-8 was replaced, counted by the file readers
    rows = example_rows(source, columns, replaced)
    block = TextBlock([], [] if columns.pair else None, None)
    skipped: list[int] = []  # the first lines of empty texts skipped
    for row in rows:
        if row is BLANK:
            block.skipped_empty += 1
            continue
        line, text, pair, label = row
        if not text.strip() and (skip := skipped_as(text, pair, label, columns.keep_empty)):
            block.skipped_empty += 1
            if skip == NAMED and warn and len(skipped) <= WARNED_LINES:
                skipped.append(line)
            continue
        block.texts.append(text)
        cast(list[int], block.lines).append(row[0])  # a block being read keeps a list
        if block.pairs is not None:
            block.pairs.append(pair)
        if label is not NO_LABEL:
            if block.labels is None:
                block.labels = []
            block.labels.append(label)
        if len(block.texts) >= block_rows:
            block.replaced_lines, replaced[0] = replaced[0], 0
            yield block
            block = TextBlock([], [] if columns.pair else None, None)
    block.replaced_lines = replaced[0]
    if skipped:
        _warn_skipped(source, skipped)
    if block.texts or block.skipped_empty or block.replaced_lines:
        yield block


def _warn_skipped(source: Any, lines: list[int]) -> None:
    unit = row_unit(source)
    named = ", ".join(str(n) for n in lines[:WARNED_LINES]) + (", ..." if len(lines) > WARNED_LINES else "")
    warnings.warn(
        f"{describe_source(source)}: keep_empty=False skipped empty texts at {unit}s {named} (the report "
        "counts them all); results no longer line up with the input there: keep_empty=True keeps them",
        stacklevel=3,
    )


SILENT, NAMED = 1, 2  # an empty example skipped: a labelled row of empty fields; an empty text (keep_empty=False)


def skipped_as(text: str, pair: str | None, label: Any, keep_empty: bool) -> int:
    """Whether an example whose text is blank is skipped: 0 kept, :data:`SILENT` (a labelled row whose
    fields are all empty, ``\\t``: blank, not a class ""), :data:`NAMED` (``keep_empty=False``: named
    in the warning)."""
    if label is not None and label is not NO_LABEL and not str(label).strip() and not (pair or "").strip():
        return SILENT
    return 0 if keep_empty else NAMED


def whole_block(source: Any, columns: TextColumns, bulk: Bulk, label_types: set[type]) -> TextBlock:
    """``bulk`` as one :class:`TextBlock`, empty examples handled as :func:`iter_blocks` does.

    ``label_types`` are the types of ``bulk.labels``: where empty texts are kept and no label is a
    string (so none is blank), no example can be dropped and the texts are not scanned."""
    labels = bulk.labels
    if columns.keep_empty and not any(issubclass(t, str) for t in label_types):
        return TextBlock(bulk.texts, bulk.pairs, labels, bulk.blanks, 0, bulk.lines)
    drop: list[int] = []
    named: list[int] = []
    blank = map(operator.not_, map(str.strip, bulk.texts))  # C-level loops: no Python call per row
    for i in itertools.compress(range(len(bulk.texts)), blank):
        skip = skipped_as(
            bulk.texts[i],
            None if bulk.pairs is None else bulk.pairs[i],
            NO_LABEL if labels is None else labels[i],
            columns.keep_empty,
        )
        if skip:
            drop.append(i)
            if skip == NAMED and len(named) <= WARNED_LINES:
                named.append(bulk.lines[i])
    if named:
        _warn_skipped(source, named)
    if not drop:
        return TextBlock(bulk.texts, bulk.pairs, labels, bulk.blanks, 0, bulk.lines)
    gone = set(drop)
    kept = [i for i in range(len(bulk.texts)) if i not in gone]
    pairs = None if bulk.pairs is None else [bulk.pairs[i] for i in kept]
    labels = None if labels is None else [labels[i] for i in kept]
    texts, lines = [bulk.texts[i] for i in kept], [bulk.lines[i] for i in kept]
    return TextBlock(texts, pairs, labels, bulk.blanks + len(drop), 0, lines)


def read_table(source: Any, columns: TextColumns = DEFAULT_COLUMNS) -> TextTable:
    """The whole source in memory (labels coded: see :mod:`stoker.text.labels`), for loading on the fly."""
    bulk = bulk_rows(source, columns)
    label_types = set() if bulk is None or bulk.labels is None else set(map(type, bulk.labels))
    if bulk is not None:  # its lists are the reader's own copies: kept as they are
        block = whole_block(source, columns, bulk, label_types)
    else:
        block = joined(iter_blocks(source, columns), columns)
    texts, pairs, raw, skipped = block.texts, block.pairs, block.labels, block.skipped_empty
    at = block.lines
    where_is = np.arange(at.start, at.stop) if isinstance(at, range) else np.asarray(at, dtype=np.int64)
    where = describe_source(source)
    if not texts:
        raise EmptyDatasetError(f"{where} holds no text ({skipped} empty lines skipped; keep_empty=True keeps them)")
    label_array, names = None, None
    if raw is not None and columns.label_names is None and label_types == {int}:
        label_array = np.asarray(raw, dtype=np.int64)  # plain ints (read in bulk): what the coder gives them
    elif raw is not None:
        coder = LabelCoder.fit(raw, where, columns.label_names)
        label_array, names = coder.encode(raw, where_is, where, row_unit(source)), coder.label_names
    elif columns.label_names is not None:
        raise ConfigError(
            f"label_names/class_to_idx were given but {where} has no labels (label_column={columns.label!r})",
            option="label_names",
        )
    return TextTable(texts, pairs, label_array, names, where, skipped, block.replaced_lines, where_is)


def joined(blocks: Iterator[TextBlock], columns: TextColumns) -> TextBlock:
    """The blocks of a source as one block (``lines`` an int64 array)."""
    out = TextBlock([], [] if columns.pair else None, None)
    lines: list[np.ndarray] = []
    for block in blocks:
        out.texts.extend(block.texts)
        lines.append(np.asarray(block.lines, dtype=np.int64))
        if out.pairs is not None and block.pairs is not None:
            out.pairs.extend(block.pairs)
        if block.labels is not None:
            if out.labels is None:
                out.labels = []
            out.labels.extend(block.labels)
        out.skipped_empty += block.skipped_empty
        out.replaced_lines += block.replaced_lines
    out.lines = np.concatenate(lines) if lines else np.zeros(0, dtype=np.int64)
    return out


def scan_labels(source: Any, columns: TextColumns) -> LabelCoder | None:
    """The label coder of a whole source, read once without keeping its texts (a conversion's first pass).

    ``None`` when the source has no labels. With a given map the source is not read.
    """
    if columns.label_names is not None:
        return LabelCoder(columns.label_names, given=True)
    raw: list[Any] = []
    found = False
    for block in iter_blocks(source, columns, warn=False):  # the pass that keeps the texts warns
        if block.labels is not None:
            found = True
            raw.extend(block.labels)
    return LabelCoder.fit(raw, describe_source(source)) if found else None


__all__ = [
    "AUTO",
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
