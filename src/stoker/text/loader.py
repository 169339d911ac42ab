"""``stoker.text.Loader``: BERT-ready batches from raw text or a text store.

A thin subclass of :class:`stoker.Loader`: it resolves the tokenizer, reads the source, picks
the batch sampler (plain, length-bucketed or packed) and the BatchSource (padded or packed),
and hands both to the core loader, which runs ``read`` in its worker threads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from stoker.config import LoaderConfig
from stoker.device.transfer import resolve_device
from stoker.errors import ConfigError
from stoker.loader import Loader as CoreLoader
from stoker.loader import distributed_rank as _distributed_rank
from stoker.pipeline.sampler import FixedBatches, Sampler, order_name
from stoker.store.reader import Store
from stoker.text.batches import METADATA_KEY, PaddedText, StoredRows, TokenizedRows
from stoker.text.bucketing import LengthBuckets
from stoker.text.packing import PackedBatches, PackedText, ragged_docs, store_docs
from stoker.text.report import Tally, TextReport
from stoker.text.inputs import AUTO, TextColumns, read_table
from stoker.text.tokenizer import TextTokenizer, resolve

DEFAULT_MAX_LENGTH = 512


@dataclass(frozen=True)
class TextConfig:
    """The text options of :class:`Loader` (the others are :class:`stoker.LoaderConfig`'s).

    Attributes:
        max_length: longest example in tokens, special tokens included; longer ones are cut
            (keeping [CLS]/[SEP]) and counted. With ``packing``: the block length.
        pad_to_multiple_of: a batch's width is its longest row rounded up to this (8 suits tensor cores).
        bucketing: group similar lengths (``"auto"``: when shuffling). See bucketing.py.
        max_tokens: a token budget per batch instead of a fixed row count (implies bucketing).
        window: batches sorted together when bucketing.
        packing: concatenate documents into blocks of ``max_length`` tokens, no padding.
        token_type_ids: also return ``token_type_ids`` (always for sentence pairs).
        pad_id: override the tokenizer's pad id.
        text_column, pair_column, label_column: fields of JSONL/CSV/TSV sources (``label_column="auto"``
            reads ``label`` when there is one); ``pair_column`` reads sentence pairs.
        keep_empty: keep empty lines (default: skip and count them).
        encoding_errors: ``"strict"`` (invalid UTF-8 is an error naming file and line) or ``"replace"``.
    """

    max_length: int | None = DEFAULT_MAX_LENGTH
    pad_to_multiple_of: int = 8
    bucketing: bool | str = AUTO
    max_tokens: int | None = None
    window: int = 100
    packing: bool = False
    token_type_ids: bool = False
    pad_id: int | None = None
    text_column: str = "text"
    pair_column: str | None = None
    label_column: str | None = AUTO
    keep_empty: bool = False
    encoding_errors: str = "strict"

    def __post_init__(self) -> None:
        if self.bucketing not in (True, False, AUTO):
            raise ConfigError(f"bucketing must be True, False or 'auto', not {self.bucketing!r}", option="bucketing")
        if self.packing and self.max_length is None:
            raise ConfigError("packing=True needs max_length: it is the block length", option="max_length")
        if self.packing and (self.max_tokens is not None or self.bucketing is True):
            raise ConfigError("packing makes full blocks: it takes neither max_tokens nor bucketing", option="packing")
        if self.max_tokens is not None and self.max_length is not None and self.max_tokens < self.max_length:
            raise ConfigError(f"max_tokens={self.max_tokens} is below max_length={self.max_length}: a long example would not fit a batch", option="max_tokens")

    @property
    def columns(self) -> TextColumns:
        return TextColumns(self.text_column, self.pair_column, self.label_column, self.keep_empty, self.encoding_errors)

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}


def _token_counts(rows: TokenizedRows, block: int = 8192) -> np.ndarray:
    """Tokens per example, one encode_batch per block (bounded memory on large corpora)."""
    n = len(rows)
    return np.concatenate([rows.fetch(np.arange(i, min(i + block, n))).ids.lengths for i in range(0, n, block)])


def _is_store(source: Any) -> bool:
    return isinstance(source, Store) or (isinstance(source, (str, os.PathLike)) and (Path(source) / "manifest.json").is_file())


class Loader(CoreLoader):
    """Batches of token ids from texts (tokenized on the fly) or from a text store.

    Args:
        source: a list of strings (or of ``(text, text_b)`` pairs), a dict of columns, a path to
            a .txt (one example per line), .jsonl, .csv or .tsv file, or a store written by
            ``stoker.convert.text`` (or its path).
        tokenizer: a name (``"bert-base-uncased"``, bundled), a path to tokenizer.json or
            vocab.txt, a ``tokenizers.Tokenizer`` or a transformers fast tokenizer. Not needed
            for a store.
        batch_size, shuffle: as in ``torch.utils.data.DataLoader`` (with ``max_tokens``,
            ``batch_size`` caps the rows of a batch; pass ``None`` for no cap).
        max_length: see :class:`TextConfig`. For a store, truncation was decided at conversion;
            ``max_length`` then only sets the block length of ``packing``.
        **options: the other fields of :class:`TextConfig` and of :class:`stoker.LoaderConfig`
            (``device``, ``num_workers``, ``seed``, ``rank``, ``world_size``, ``drop_last``, ...).

    Batches are dicts of tensors: ``input_ids``, ``attention_mask`` (int64), ``token_type_ids``
    when asked or for pairs, ``labels`` when the source has them; with ``packing``,
    ``input_ids`` and ``position_ids``. :meth:`report` counts tokens, padding and truncation.
    """

    def __init__(
        self,
        source: Any,
        tokenizer: Any = "bert-base-uncased",
        batch_size: int | None = 32,
        max_length: int | None = DEFAULT_MAX_LENGTH,
        shuffle: bool = False,
        **options: Any,
    ) -> None:
        text_opts = {k: options.pop(k) for k in list(options) if k in TextConfig.names()}
        unknown = set(options) - LoaderConfig.names() - {"collate_fn"}
        if unknown:
            raise ConfigError(
                f"unknown option(s) {sorted(unknown)}; text options are {sorted(TextConfig.names())}, "
                f"loader options {sorted(LoaderConfig.names())}",
                option=sorted(unknown)[0],
            )
        self.text_config = cfg = TextConfig(max_length=max_length, **text_opts)
        self._tally = Tally()
        core_opts = {k: v for k, v in options.items() if k != "collate_fn"}
        base = LoaderConfig.from_options(batch_size=batch_size or 1, shuffle=shuffle, **core_opts)  # validates early
        rank, world = _distributed_rank(base.rank, base.world_size)
        if _is_store(source):
            store = source if isinstance(source, Store) else Store(source)
            rows: Any = StoredRows(store)
            info = rows.info
            if cfg.pad_id is not None:
                pad_id = cfg.pad_id
            elif "pad_id" in info:
                pad_id = int(info["pad_id"])
            else:
                pad_id = resolve(tokenizer, pad_id=cfg.pad_id).pad_id
            self.tokenizer: TextTokenizer | None = None
            self._tally.skipped_empty = int(info.get("skipped_empty", 0))
            self._tally.replaced_lines = int(info.get("replaced_lines", 0))
            lengths = rows.lengths
        else:
            self.tokenizer = resolve(tokenizer, max_length=None if cfg.packing else cfg.max_length, pad_id=cfg.pad_id)
            table = read_table(source, cfg.columns)
            rows = TokenizedRows(table, self.tokenizer)
            pad_id = self.tokenizer.pad_id
            self._tally.skipped_empty, self._tally.replaced_lines = table.skipped_empty, table.replaced_lines
            # bucketing needs token counts (characters predict them too loosely: 26 % padding
            # instead of 4 % on short sentences), so it tokenizes everything once, up front
            lengths = lambda: _token_counts(rows)  # noqa: E731
        if cfg.packing:
            if isinstance(rows, StoredRows):
                doc_lengths, docs = rows.lengths(), store_docs(rows.store)
            else:
                ids = self.tokenizer.encode(rows.table.texts).ids  # whole corpus, once: blocks need every length
                doc_lengths, docs = ids.lengths, ragged_docs(ids)
            sampler: Any = PackedBatches(doc_lengths, cfg.max_length, base.batch_size, bool(shuffle), base.seed, rank, world, base.drop_last)
            data: Any = PackedText(docs, doc_lengths, cfg.max_length, bool(shuffle), base.seed, self._tally)
        else:
            on_cuda = resolve_device(base.device).type == "cuda"
            data = PaddedText(rows, pad_id, cfg.pad_to_multiple_of, cfg.token_type_ids, on_cuda, self._tally)
            bucket = cfg.max_tokens is not None or (cfg.bucketing is True) or (cfg.bucketing == AUTO and order_name(shuffle) != "sequential")
            if bucket:
                sampler = LengthBuckets(
                    np.asarray(lengths()), batch_size, cfg.max_tokens, order_name(shuffle) != "sequential", base.seed,
                    cfg.window, rank, world, base.uneven, cfg.pad_to_multiple_of,
                )  # fmt: skip
            else:
                if batch_size is None:
                    raise ConfigError("batch_size=None needs max_tokens (a token budget decides the batch sizes)", option="batch_size")
                plain = Sampler(len(rows), order_name(shuffle), base.seed, base.block_size, base.window, rank, world, base.uneven)
                sampler = FixedBatches(plain, batch_size, base.drop_last)
        for name in ("batch_size", "shuffle", "drop_last", "rank", "world_size"):
            options.pop(name, None)
        super().__init__(data, batch_sampler=sampler, **options)

    def report(self) -> TextReport:
        """Tokens, padding and truncation over the batches delivered so far."""
        return self._tally.report()

    def reset_report(self) -> None:
        self._tally.reset()


__all__ = ["DEFAULT_MAX_LENGTH", "Loader", "TextConfig", "METADATA_KEY"]
