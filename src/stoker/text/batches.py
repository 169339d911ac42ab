"""Padded text batches, tokenized on the fly or read from a store (the loader's BatchSource).

Both kinds of rows give flat token ids (:class:`~stoker.store.columns.Ragged`), optional type ids
and labels for a chunk of index batches; one :class:`~stoker.pipeline.padding.PadGrid` per chunk
fills ids, type ids and the attention mask with one scatter each, every batch padded to its own
longest row rounded up to ``pad_to_multiple_of``. Ids travel to a GPU in their smallest dtype and
``finalize`` makes them int64 there; when batches land on the CPU they are padded into int64 in
the worker instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from stoker.errors import ConfigError, SchemaError
from stoker.pipeline.padding import PadGrid
from stoker.pipeline.schedule import Costs
from stoker.pipeline.source import BatchSource
from stoker.store.columns import Ragged
from stoker.store.reader import Store
from stoker.text.cache import TokenCache
from stoker.text.inputs import TextTable, where_is
from stoker.text.report import TALLY_KEY, BatchTally, Tally, TextReport
from stoker.text.tokenizer import Encoded, TextTokenizer

METADATA_KEY = "stoker.text"
DEFAULT_PAD_MULTIPLE = 8  # a text batch's width rounds up to this (tensor cores), when not given


@dataclass(frozen=True)
class TokenizedRows:
    """Rows tokenized on the fly, once: a :class:`~stoker.text.cache.TokenCache` keeps their ids,
    so a row read again (a later epoch) is gathered, not tokenized."""

    table: TextTable
    tokenizer: TextTokenizer
    cache: TokenCache = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cache", TokenCache(self.table, self.tokenizer))

    def __len__(self) -> int:
        return len(self.table)

    @property
    def has_pairs(self) -> bool:
        return self.table.pairs is not None

    @property
    def labels(self) -> np.ndarray | None:
        return self.table.labels

    def fetch(self, idx: np.ndarray) -> Encoded:
        """Rows ``idx``: gathered from the cache, or tokenized (one ``encode_batch``) and cached."""
        return self.cache.fetch(idx)

    def lengths(self, progress: Any = None) -> np.ndarray:
        """Tokens per row (special tokens included, after truncation): every row not cached yet is
        tokenized now and cached, with ``progress`` as :mod:`stoker.text.progress` shows it."""
        self.cache.progress = progress
        return self.cache.all()

    def describe(self, row: int) -> str:
        """Where row ``row`` came from (file and line, or the row of a list or dict)."""
        return self.table.describe(row)

    def bytes_per_row(self) -> float:
        return 4.0 * sum(map(len, self.table.texts[:1000])) / max(1, min(1000, len(self.table)))


@dataclass(frozen=True)
class StoredRows:
    """Rows a ``stoker convert text`` store holds: gathered, already tokenized.

    Attributes:
        store: the store.
        max_length: cut rows longer than this further (below the store's own ``max_length``),
            keeping the last ``tail`` ids (the special tokens the tokenizer adds after a text,
            [SEP] for BERT) as the tokenizer's truncation keeps them; ``None``: as stored.
        tail: special tokens after a text (the store's metadata says how many).
    """

    store: Store
    max_length: int | None = None
    tail: int = 0
    labels: np.ndarray | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if "input_ids" not in self.store.schema or self.store.schema["input_ids"].kind != "sequence":
            raise SchemaError(
                f"{self.store.path} has no input_ids sequence column (columns: {sorted(self.store.schema)}); "
                "write text stores with stoker.convert.text or 'stoker convert text'",
                column="input_ids",
            )
        name = self.label_column
        if name is not None:
            object.__setattr__(self, "labels", self.store.gather(np.arange(len(self.store)), [name])[name])

    @property
    def label_column(self) -> str | None:
        """``labels`` (``label`` in stores written before the names followed the batches'), or None."""
        return next((c for c in ("labels", "label") if c in self.store.schema), None)

    def describe(self, row: int) -> str:
        """Where row ``row`` came from, from the store's ``line`` column and recorded source."""
        origin = str(self.info.get("source", self.store.path))
        if "line" not in self.store.schema:
            return f"row {row} of the store {self.store.path} (written without line numbers)"
        line = int(self.store.gather(np.asarray([row]), ["line"])["line"][0])
        return where_is(origin, line)

    def __len__(self) -> int:
        return len(self.store)

    @property
    def info(self) -> dict[str, Any]:
        return dict(self.store.metadata.get(METADATA_KEY, {}))

    @property
    def has_pairs(self) -> bool:
        return "token_type_ids" in self.store.schema

    def lengths(self, progress: Any = None) -> np.ndarray:
        """Exact token counts, from the store's ``length`` column (or the id offsets), after ``max_length``."""
        every = np.arange(len(self.store))
        if "length" in self.store.schema:
            got = self.store.gather(every, ["length"])["length"].astype(np.int64)
        else:
            got = self.store.gather(every, ["input_ids"])["input_ids"].lengths
        return got if self.max_length is None else np.minimum(got, self.max_length)

    def fetch(self, idx: np.ndarray) -> Encoded:
        names = ["input_ids"] + (["token_type_ids"] if self.has_pairs else [])
        if "truncated" in self.store.schema:
            names.append("truncated")
        got = self.store.gather(idx, names)
        cut = got.get("truncated")
        enc = Encoded(got["input_ids"], got.get("token_type_ids"), None if cut is None else cut.astype(bool))
        return enc if self.max_length is None else cut_further(enc, self.max_length, self.tail)

    def bytes_per_row(self) -> float:
        return self.store.nbytes / max(len(self.store), 1)


def cut_further(enc: Encoded, max_length: int, tail: int) -> Encoded:
    """``enc`` with rows longer than ``max_length`` cut to it: their first ``max_length - tail``
    ids and their last ``tail`` (the closing special tokens), counted as truncated."""
    ids = enc.ids
    lengths = ids.lengths
    if not len(lengths) or int(lengths.max()) <= max_length:
        return enc
    new = np.minimum(lengths, max_length)
    pos = np.arange(len(ids.values)) - np.repeat(ids.offsets[:-1], lengths)  # position within its row
    row_len, row_new = np.repeat(lengths, lengths), np.repeat(new, lengths)
    keep = (pos < row_new - tail) | (pos >= row_len - tail)
    offsets = np.zeros(len(new) + 1, dtype=np.int64)
    np.cumsum(new, out=offsets[1:])
    cut = lengths > max_length
    truncated = cut if enc.truncated is None else (enc.truncated | cut)
    types = None if enc.type_ids is None else Ragged(enc.type_ids.values[keep], offsets)
    return Encoded(Ragged(ids.values[keep], offsets), types, truncated)


def per_batch(values: np.ndarray | None, sizes: np.ndarray, bounds: np.ndarray) -> list[int]:
    """The sum of ``values`` (one per row) over each batch of ``sizes`` rows starting at ``bounds``."""
    if values is None or not len(values):
        return [0] * len(sizes)
    sums = np.add.reduceat(values.astype(np.int64), bounds[:-1])
    return np.where(sizes > 0, sums, 0).tolist()  # reduceat gives a row's value for an empty batch


@dataclass(frozen=True)
class PaddedText(BatchSource):
    """A BatchSource of dynamically padded text batches.

    Attributes:
        rows: :class:`TokenizedRows` or :class:`StoredRows`.
        pad_id: the tokenizer's pad id.
        pad_to_multiple_of: each batch's width is its longest row rounded up to this.
        token_type_ids: add ``token_type_ids`` (always for sentence pairs).
        widen_on_device: ``True`` sends ids and masks in their smallest dtypes and makes them
            int64 in ``finalize`` (less over the bus to a GPU); ``False`` pads straight into int64
            in the worker (no second pass on a CPU); ``None`` decides from where batches land:
            the first batch ``finalize`` sees on the CPU switches the reads after it to int64.
        tally: the running counts behind :meth:`report`.
    """

    rows: Any
    pad_id: int
    pad_to_multiple_of: int = DEFAULT_PAD_MULTIPLE
    token_type_ids: bool = False
    widen_on_device: bool | None = None
    tally: Tally = field(default_factory=Tally)
    _wide_reads: bool = field(init=False, default=False, repr=False)  # learned in finalize (widen_on_device=None)

    def __post_init__(self) -> None:
        multiple = self.pad_to_multiple_of
        if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
            message = f"pad_to_multiple_of must be an integer >= 1, got {multiple!r}"
            raise ConfigError(message, option="pad_to_multiple_of")
        if self.widen_on_device not in (True, False, None):
            raise ConfigError(
                f"widen_on_device must be True, False or None, not {self.widen_on_device!r}", option="widen_on_device"
            )

    @property
    def sends_narrow_ids(self) -> bool:
        """Whether reads from now on send ids and masks in their smallest dtypes (widened in ``finalize``)."""
        return self.widen_on_device is True or (self.widen_on_device is None and not self._wide_reads)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def streaming(self) -> bool:
        """Whether a sampler streams this source's lengths and its cache is still being filled."""
        cache = getattr(self.rows, "cache", None)
        return cache is not None and cache.ordered and not cache.complete

    def batch_bytes(self, batch_size: int) -> float | None:
        """Bytes of text per batch (chunks of ~1 MiB); None (one batch per chunk) while the lengths
        are streamed, so the first batch waits for its own window only."""
        return None if self.streaming else batch_size * self.rows.bytes_per_row()

    def costs(self, batch_size: int) -> Costs:
        """Reads that gather stored ids (a store, the token cache of a bucketed source) only copy,
        under the GIL: read in the consumer's thread. Reads that tokenize release the GIL."""
        cache = getattr(self.rows, "cache", None)
        gathers = isinstance(self.rows, StoredRows) or (cache is not None and (cache.ordered or cache.complete))
        return Costs(self.batch_bytes(batch_size), copies=gathers)

    def set_epoch(self, epoch: int) -> None:
        """On the fly: check that the cached ids still match the tokenizer (see ``TokenCache.check``)."""
        if isinstance(self.rows, TokenizedRows):
            self.rows.cache.check()

    def close(self) -> None:
        """On the fly: stop the background tokenization and remove the cache's temporary files."""
        if isinstance(self.rows, TokenizedRows):
            self.rows.cache.close()

    def report(self) -> TextReport:
        """Tokens, padding and truncation over the batches delivered so far."""
        return self.tally.report()

    def describe(self, row: int) -> str:
        """Where row ``row`` came from: ``"corpus.tsv, line 12"`` (from a store, its ``line`` column)."""
        if not 0 <= row < len(self.rows):
            raise IndexError(f"row {row} is out of range for a text source of {len(self.rows)} rows")
        return str(self.rows.describe(row))

    def reset_report(self) -> None:
        """Start the counts of delivered batches again from zero."""
        self.tally.reset()

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, Any]]:
        idx = np.concatenate(chunk) if len(chunk) > 1 else np.asarray(chunk[0])
        enc = self.rows.fetch(idx)
        sizes = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
        grid = PadGrid.of(enc.ids.offsets, sizes, self.pad_to_multiple_of)
        wide = None if self.sends_narrow_ids else np.int64
        ids = grid.fill(enc.ids.values, self.pad_id, wide)
        masks = grid.mask(wide or np.uint8)
        types = None
        if enc.type_ids is not None and (self.token_type_ids or self.rows.has_pairs):
            types = grid.fill(enc.type_ids.values, 0, wide)
        elif self.token_type_ids:
            types = np.zeros(len(ids), dtype=wide or np.uint8)
        labels = None if self.rows.labels is None else self.rows.labels[idx]
        bounds = grid.bounds.tolist()
        starts, widths, rows = grid.starts.tolist(), grid.widths.tolist(), sizes.tolist()
        real, cut, long = (per_batch(v, sizes, grid.bounds) for v in (enc.ids.lengths, enc.truncated, enc.cut))
        out = []
        for k, (a, b, n, w) in enumerate(zip(starts, starts[1:], rows, widths)):
            batch: dict[str, Any] = {"input_ids": ids[a:b].reshape(n, w), "attention_mask": masks[a:b].reshape(n, w)}
            if types is not None:
                batch["token_type_ids"] = types[a:b].reshape(n, w)
            if labels is not None:
                batch["labels"] = labels[bounds[k] : bounds[k + 1]]
            batch[TALLY_KEY] = BatchTally(n, real[k], n * w - real[k], cut[k], long[k])
            out.append(batch)
        return out

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        tally = batch.pop(TALLY_KEY, None)
        if tally is not None:
            self.tally.add(tally)
        ids = batch["input_ids"]
        if ids.dtype == torch.int64:  # padded into int64 by the worker
            return batch
        if self.widen_on_device is None and ids.device.type == "cpu":
            object.__setattr__(self, "_wide_reads", True)  # batches land on the CPU: widen in the workers
        batch["input_ids"] = ids.long()
        batch["attention_mask"] = batch["attention_mask"].long()
        if "token_type_ids" in batch:
            batch["token_type_ids"] = batch["token_type_ids"].long()
        return batch


__all__ = ["METADATA_KEY", "PaddedText", "StoredRows", "TokenizedRows", "cut_further"]
