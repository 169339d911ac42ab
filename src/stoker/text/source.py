"""``TextSource``: padded batches of token ids from texts or a text store, for :class:`stoker.Loader`.

    source = stoker.text.TextSource("corpus.txt", tokenizer="bert-base-uncased", max_length=128)
    buckets = stoker.text.LengthBuckets(source.lengths(), batch_size=32, round_to=source.pad_to_multiple_of)
    loader = stoker.Loader(source, batch_sampler=buckets)          # or batch_size=32 without bucketing

:func:`open_rows` turns what the user passes (texts, a file, a store) into rows that give
token ids for a batch of indices; :class:`TextSource` pads them (``batches.PaddedText``) and
:func:`packed_source` packs them (``packing.PackedText``). ``stoker.text.Loader`` builds one of
them and a batch sampler, and hands both to the core loader.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stoker.store.reader import Store
from stoker.text.batches import PaddedText, StoredRows, TokenizedRows
from stoker.text.inputs import TextColumns, read_table
from stoker.text.packing import PackedText, ragged_docs, store_docs
from stoker.text.report import Tally
from stoker.text.tokenizer import TextTokenizer, resolve

DEFAULT_MAX_LENGTH = 512


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


def open_rows(
    data: Any, tokenizer: Any, max_length: int | None, pad_id: int | None, columns: TextColumns
) -> OpenedRows:
    """Rows of ``data``: a store (or its path), or texts read with ``columns`` and tokenized when read.

    ``max_length`` truncates texts (``None``: no truncation); a store was truncated at conversion.
    The tokenizer is resolved for texts, and for a store only when neither ``pad_id`` nor the
    store says which pad id to use.
    """
    if is_store(data):
        rows = StoredRows(data if isinstance(data, Store) else Store(data))
        info = rows.info
        if pad_id is None:
            pad_id = int(info["pad_id"]) if "pad_id" in info else resolve(tokenizer).pad_id
        return OpenedRows(rows, pad_id, None, int(info.get("skipped_empty", 0)), int(info.get("replaced_lines", 0)))
    tok = resolve(tokenizer, max_length=max_length, pad_id=pad_id)
    table = read_table(data, columns)
    return OpenedRows(TokenizedRows(table, tok), tok.pad_id, tok, table.skipped_empty, table.replaced_lines)


class TextSource(PaddedText):
    """Dynamically padded batches from texts (tokenized in the loader's workers) or a text store.

    Args:
        data: a list of strings (or of ``(text, text_b)`` pairs), a dict of columns, a path to a
            .txt (one example per line), .jsonl, .csv or .tsv file, or a store written by
            ``stoker.convert.text`` (or its path).
        tokenizer: a name (``"bert-base-uncased"``, bundled), a path to tokenizer.json or
            vocab.txt, a ``tokenizers.Tokenizer`` or a transformers fast tokenizer. Not needed for
            a store that records its pad id.
        max_length: longest example in tokens, special tokens included; longer ones are cut
            (keeping [CLS]/[SEP]) and counted. A store was cut at conversion and ignores it.
        pad_to_multiple_of: a batch's width is its longest row rounded up to a multiple of this.
        token_type_ids: also return ``token_type_ids`` (always for sentence pairs).
        pad_id: override the tokenizer's (or the store's) pad id.
        columns: which fields of a file or dict hold texts, pairs and labels, and what to do with
            empty lines and invalid UTF-8 (default: ``TextColumns()``).
        widen_on_device: see :class:`~stoker.text.batches.PaddedText` (default: decided from where
            the batches land).

    Batches are dicts of tensors: ``input_ids``, ``attention_mask`` (int64), ``token_type_ids``
    when asked or for pairs, ``labels`` when the input has them. :meth:`report` counts the
    tokens, padding and truncation of the batches delivered.
    """

    tokenizer: TextTokenizer | None

    def __init__(
        self,
        data: Any,
        tokenizer: Any = "bert-base-uncased",
        max_length: int | None = DEFAULT_MAX_LENGTH,
        *,
        pad_to_multiple_of: int = 8,
        token_type_ids: bool = False,
        pad_id: int | None = None,
        columns: TextColumns | None = None,
        widen_on_device: bool | None = None,
    ) -> None:
        opened = open_rows(data, tokenizer, max_length, pad_id, columns or TextColumns())
        tally = opened.tally()
        super().__init__(opened.rows, opened.pad_id, pad_to_multiple_of, token_type_ids, widen_on_device, tally)
        object.__setattr__(self, "tokenizer", opened.tokenizer)

    def lengths(self) -> np.ndarray:
        """Tokens per row, for :class:`~stoker.text.LengthBuckets`: a store's ``length`` column, or
        (texts) the whole input tokenized once."""
        return np.asarray(self.rows.lengths(), dtype=np.int64)


def packed_source(
    data: Any, tokenizer: Any, block_length: int, shuffle: bool, seed: int, pad_id: int | None, columns: TextColumns
) -> PackedText:
    """A :class:`~stoker.text.packing.PackedText` over every document of ``data`` (untruncated).

    Blocks need every document's length, so texts are tokenized here, once, in full.
    """
    opened = open_rows(data, tokenizer, None, pad_id, columns)
    rows = opened.rows
    if isinstance(rows, StoredRows):
        lengths, docs = rows.lengths(), store_docs(rows.store)
    else:
        ids = rows.tokenizer.encode(rows.table.texts).ids
        lengths, docs = ids.lengths, ragged_docs(ids)
    return PackedText(docs, lengths, block_length, shuffle, seed, opened.tally())


__all__ = ["DEFAULT_MAX_LENGTH", "OpenedRows", "TextSource", "is_store", "open_rows", "packed_source"]
