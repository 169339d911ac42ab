"""``TextSource``: padded batches of token ids from texts or a text store, for :class:`stoker.Loader`.

:func:`open_rows` turns what the user passes (texts, a file, a store) into rows that give token
ids for a batch of indices; :class:`TextSource` pads them (``batches.PaddedText``) and
:func:`packed_source` packs them (``packing.PackedText``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.pipeline.ranks import digest, store_fingerprint
from stoker.store.reader import Store
from stoker.text.batches import DEFAULT_PAD_MULTIPLE, PaddedText, StoredRows, TokenizedRows
from stoker.text.bucketing import StreamedLengths
from stoker.text.from_store import UNSET, store_rows, store_tokenizer
from stoker.text.inputs import TextColumns, read_table
from stoker.text.labels import label_map
from stoker.text.packing import PackedText, ragged_docs, store_docs
from stoker.text.progress import check_progress
from stoker.text.report import Tally
from stoker.text.tokenizer import TextTokenizer, resolve

DEFAULT_MAX_LENGTH = 512  # on the fly, when max_length= is not given
DEFAULT_TOKENIZER = "bert-base-uncased"  # on the fly, when tokenizer= is not given


def is_store(data: Any) -> bool:
    """Whether ``data`` is a store or the path of one (a directory with a manifest)."""
    if isinstance(data, Store):
        return True
    return isinstance(data, (str, os.PathLike)) and (Path(data) / "manifest.json").is_file()


@dataclass(frozen=True)
class OpenedRows:
    """Rows ready to read, with what reading the input found out.

    Attributes:
        rows: :class:`~stoker.text.batches.TokenizedRows` (texts) or ``StoredRows`` (a store).
        pad_id: the pad id: given, recorded in the store, or the tokenizer's.
        tokenizer: the resolved tokenizer (``None`` for a store).
        skipped_empty, replaced_lines: counts from reading the input (or from its conversion).
    """

    rows: TokenizedRows | StoredRows
    pad_id: int
    tokenizer: TextTokenizer | None
    skipped_empty: int
    replaced_lines: int

    def tally(self) -> Tally:
        """A fresh tally of delivered batches that starts from the input's counts."""
        return Tally(self.skipped_empty, self.replaced_lines)


def open_rows(data: Any, tokenizer: Any, max_length: Any, pad_id: int | None, columns: TextColumns) -> OpenedRows:
    """Rows of ``data``: a store (or its path), or texts read with ``columns`` and tokenized when read.

    ``max_length`` truncates texts (``None``: no truncation; :data:`UNSET`: 512). For a store,
    ``tokenizer`` and ``max_length`` are checked against what it holds (``from_store.py``);
    :data:`UNSET` takes the store's. A store given a map of label names must hold the same one.
    """
    if is_store(data):
        store = data if isinstance(data, Store) else Store(data)
        rows = store_rows(store, max_length)
        info = rows.info
        tok = store_tokenizer(store, info, tokenizer)
        held = info.get("label_names")
        if columns.label_names is not None and tuple(held or ()) != columns.label_names:
            raise ConfigError(
                f"label_names {list(columns.label_names)} differ from the store's {held} ({store.path} numbered its "
                "labels at conversion); convert the text again with these label_names",
                option="label_names",
            )
        if pad_id is None:
            if "pad_id" in info:
                pad_id = int(info["pad_id"])
            else:
                pad_id = (tok or resolve(DEFAULT_TOKENIZER if tokenizer is UNSET else tokenizer)).pad_id
        return OpenedRows(rows, pad_id, tok, int(info.get("skipped_empty", 0)), int(info.get("replaced_lines", 0)))
    tok = resolve(
        DEFAULT_TOKENIZER if tokenizer is UNSET else tokenizer,
        max_length=DEFAULT_MAX_LENGTH if max_length is UNSET else max_length,
        pad_id=pad_id,
    )
    table = read_table(data, columns)
    return OpenedRows(TokenizedRows(table, tok), tok.pad_id, tok, table.skipped_empty, table.replaced_lines)


class TextSource(PaddedText):
    """Dynamically padded batches from texts (tokenized in the loader's workers) or a text store.

    Args:
        data, tokenizer: as :func:`stoker.text.Loader`'s ``source`` and ``tokenizer``.
        max_length: as :class:`~stoker.text.TextConfig`'s (512 on the fly when not given).
        pad_to_multiple_of: a batch's width is its longest row rounded up to a multiple of this.
        token_type_ids: also return ``token_type_ids`` (always for sentence pairs).
        pad_id: override the tokenizer's (or the store's) pad id.
        columns: which fields of a file or dict hold texts, pairs and labels, and what to do with
            empty lines and invalid UTF-8 (default: ``TextColumns()``).
        label_names, class_to_idx: the label map (names in id order, or a dict name -> id);
            without one, label names are numbered in sorted order.
        progress: the token count that bucketing needs (see :class:`~stoker.text.TextConfig`).
        widen_on_device: see :class:`~stoker.text.batches.PaddedText`.

    Batches are those of :func:`stoker.text.Loader`; :meth:`report` counts the tokens, padding and
    truncation of the batches delivered.
    """

    tokenizer: TextTokenizer | None
    label_names: tuple[str, ...] | None
    progress: Any

    def __init__(
        self,
        data: Any,
        tokenizer: Any = UNSET,
        max_length: Any = UNSET,
        *,
        pad_to_multiple_of: int = DEFAULT_PAD_MULTIPLE,
        token_type_ids: bool = False,
        pad_id: int | None = None,
        columns: TextColumns | None = None,
        widen_on_device: bool | None = None,
        label_names: Sequence[str] | None = None,
        class_to_idx: Mapping[str, int] | None = None,
        progress: Any = None,
    ) -> None:
        check_progress(progress)
        columns = with_label_map(columns or TextColumns(), label_names, class_to_idx)
        opened = open_rows(data, tokenizer, max_length, pad_id, columns)
        tally = opened.tally()
        super().__init__(opened.rows, opened.pad_id, pad_to_multiple_of, token_type_ids, widen_on_device, tally)
        object.__setattr__(self, "tokenizer", opened.tokenizer)
        object.__setattr__(self, "progress", progress)
        rows = opened.rows
        names = rows.table.label_names if isinstance(rows, TokenizedRows) else rows.info.get("label_names")
        object.__setattr__(self, "label_names", None if names is None else tuple(names))
        if isinstance(rows, TokenizedRows):
            rows.cache.progress = progress

    def lengths(self) -> np.ndarray:
        """Tokens per row, for :class:`~stoker.text.LengthBuckets`: a store's ``length`` column, or
        (texts) the whole input tokenized now (with a progress bar, see ``progress``); the ids
        are kept, so reads gather them instead of tokenizing again."""
        return np.asarray(self.rows.lengths(self.progress), dtype=np.int64)

    def streamed_lengths(self) -> np.ndarray | StreamedLengths:
        """Tokens per row as :class:`~stoker.text.LengthBuckets` streams them: on the fly, the token
        cache, tokenized in a background thread in the order the sampler needs (the first batches
        come before the corpus is tokenized); from a store, its ``length`` column."""
        if isinstance(self.rows, TokenizedRows):
            self.rows.cache.ordered = True
            return self.rows.cache
        return self.lengths()

    @property
    def class_to_idx(self) -> dict[str, int] | None:
        """``{name: id}`` of the label names (None for numeric labels or none)."""
        return None if self.label_names is None else {n: i for i, n in enumerate(self.label_names)}

    def content_fingerprint(self) -> str:
        """What the ranks compare (``pipeline/ranks.py``): a store's content and the ``max_length`` it
        is cut to; on the fly, a hash of every text, pair and label read and of the tokenizer."""
        rows = self.rows
        if isinstance(rows, StoredRows):
            return f"{store_fingerprint(rows.store)}:max_length={rows.max_length}"
        table, tok = rows.table, rows.tokenizer
        labels = b"" if table.labels is None else np.ascontiguousarray(table.labels).tobytes()
        texts = [*table.texts, *(table.pairs or ())]
        step = 65536  # texts joined a slice at a time: never a second copy of the whole corpus
        chunks = ("\0".join(texts[i : i + step]) for i in range(0, len(texts), step))
        return "texts:" + digest(itertools.chain([labels, tok.fingerprint, str(tok.max_length)], chunks))


def with_label_map(columns: TextColumns, label_names: Any, class_to_idx: Any) -> TextColumns:
    """``columns`` with the label map given as ``label_names=`` / ``class_to_idx=`` (both: they must agree)."""
    names = label_map(label_names, class_to_idx)
    if names is None:
        return columns
    if columns.label_names is not None and columns.label_names != names:
        raise ConfigError(
            f"label_names {list(names)} differ from columns.label_names {list(columns.label_names)}; give one map",
            option="label_names",
        )
    return dataclasses.replace(columns, label_names=names)


def packed_source(
    data: Any, tokenizer: Any, block_length: int, shuffle: bool, seed: int, pad_id: int | None, columns: TextColumns
) -> PackedText:
    """A :class:`~stoker.text.packing.PackedText` over every document of ``data`` (untruncated).

    Blocks need every document's length, so texts are tokenized here, once, in full.
    """
    opened = open_rows(data, tokenizer, UNSET if is_store(data) else None, pad_id, columns)
    rows = opened.rows
    if isinstance(rows, StoredRows):
        lengths, docs = rows.lengths(), store_docs(rows.store)
    else:
        ids = rows.tokenizer.encode(rows.table.texts).ids
        lengths, docs = ids.lengths, ragged_docs(ids)
    return PackedText(docs, lengths, block_length, shuffle, seed, opened.tally())


__all__ = [
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_PAD_MULTIPLE",
    "DEFAULT_TOKENIZER",
    "UNSET",
    "OpenedRows",
    "TextSource",
    "is_store",
    "open_rows",
    "packed_source",
    "with_label_map",
]
