"""Padded text batches, tokenized on the fly or read from a store (the loader's BatchSource).

Both kinds of rows produce the same thing for a chunk of index batches: flat token ids
(:class:`~stoker.store.columns.Ragged`), optional type ids and labels. One layout per chunk
(:class:`PadGrid`: where every token of every batch goes) then fills ids, type ids and the
attention mask with one scatter each, and the batches are views of those flat buffers, each
padded to its own longest row rounded up to ``pad_to_multiple_of``. Python's work per batch is
a few slices and one dict (the reads of tiny batches are Python-bound).

Ids travel to the device in their smallest dtype (uint16 for BERT); ``finalize`` turns them
into int64 there, one tensor operation per batch, and adds the batch's counts to the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stoker.errors import ConfigError, SchemaError
from stoker.pipeline.threads import default_workers
from stoker.store.reader import Store
from stoker.text.report import TALLY_KEY, BatchTally, Tally
from stoker.text.inputs import TextTable
from stoker.text.tokenizer import Encoded, TextTokenizer
from stoker.pipeline.source import BatchSource

METADATA_KEY = "stoker.text"


@dataclass(frozen=True)
class TokenizedRows:
    """Rows tokenized when they are read: one ``encode_batch`` per chunk, in a worker thread."""

    table: TextTable
    tokenizer: TextTokenizer

    def __len__(self) -> int:
        return len(self.table)

    @property
    def has_pairs(self) -> bool:
        return self.table.pairs is not None

    @property
    def labels(self) -> np.ndarray | None:
        return self.table.labels

    def fetch(self, idx: np.ndarray) -> Encoded:
        rows = idx.tolist()
        texts = self.table.texts
        batch = [texts[i] for i in rows]
        pairs = None if self.table.pairs is None else [self.table.pairs[i] for i in rows]
        return self.tokenizer.encode(batch, pairs)

    def bytes_per_row(self) -> float:
        return 4.0 * sum(map(len, self.table.texts[:1000])) / max(1, min(1000, len(self.table)))


@dataclass(frozen=True)
class StoredRows:
    """Rows a ``stoker convert text`` store holds: gathered, already tokenized."""

    store: Store
    labels: np.ndarray | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if "input_ids" not in self.store.schema or self.store.schema["input_ids"].kind != "sequence":
            raise SchemaError(
                f"{self.store.path} has no input_ids sequence column (columns: {sorted(self.store.schema)}); "
                "write text stores with stoker.convert.text or 'stoker convert text'",
                column="input_ids",
            )
        if "label" in self.store.schema:
            object.__setattr__(self, "labels", self.store.gather(np.arange(len(self.store)), ["label"])["label"])

    def __len__(self) -> int:
        return len(self.store)

    @property
    def info(self) -> dict[str, Any]:
        return dict(self.store.metadata.get(METADATA_KEY, {}))

    @property
    def has_pairs(self) -> bool:
        return "token_type_ids" in self.store.schema

    def lengths(self) -> np.ndarray:
        """Exact token counts, from the store's ``length`` column (or the id offsets)."""
        every = np.arange(len(self.store))
        if "length" in self.store.schema:
            return self.store.gather(every, ["length"])["length"].astype(np.int64)
        return self.store.gather(every, ["input_ids"])["input_ids"].lengths

    def fetch(self, idx: np.ndarray) -> Encoded:
        names = ["input_ids"] + (["token_type_ids"] if self.has_pairs else [])
        if "truncated" in self.store.schema:
            names.append("truncated")
        got = self.store.gather(idx, names)
        cut = got.get("truncated")
        return Encoded(got["input_ids"], got.get("token_type_ids"), None if cut is None else cut.astype(bool))

    def bytes_per_row(self) -> float:
        return self.store.nbytes / max(len(self.store), 1)


@dataclass(frozen=True)
class PadGrid:
    """Where a chunk's tokens go when its batches are padded, computed once for ids, types and masks.

    Batch ``k`` holds rows ``bounds[k]:bounds[k+1]`` of the chunk and becomes a
    ``(rows_k, widths[k])`` array: its longest row rounded up to ``multiple_of``. All batches
    share one flat buffer; batch ``k`` is ``flat[starts[k]:starts[k+1]]``, and token ``j`` of the
    chunk (flat, row after row) goes to ``flat[positions[j]]``.
    """

    bounds: np.ndarray
    widths: np.ndarray
    starts: np.ndarray
    positions: np.ndarray

    @classmethod
    def of(cls, offsets: np.ndarray, sizes: np.ndarray, multiple_of: int = 1) -> PadGrid:
        """The grid of rows with ``offsets`` (a Ragged's, from 0), cut into batches of ``sizes`` rows."""
        lengths = np.diff(offsets)
        bounds = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        full = sizes > 0
        longest = np.zeros(len(sizes), dtype=np.int64)
        if full.any():
            longest[full] = np.maximum.reduceat(lengths, bounds[:-1][full])
        widths = -(-longest // multiple_of) * multiple_of
        starts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes * widths, out=starts[1:])
        # row r of batch k starts at starts[k] + (r - bounds[k]) * widths[k]
        row_width = np.repeat(widths, sizes)
        row_start = np.repeat(starts[:-1] - bounds[:-1] * widths, sizes) + np.arange(len(lengths)) * row_width
        positions = np.repeat(row_start - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
        return cls(bounds, widths, starts, positions)

    def fill(self, values: np.ndarray, pad_value: int, dtype: Any = None) -> np.ndarray:
        """The flat padded buffer of ``values`` (one per token), in ``dtype`` (default: theirs)."""
        narrow = values.dtype
        if narrow.kind in "iu" and not np.iinfo(narrow).min <= pad_value <= np.iinfo(narrow).max:
            narrow = np.result_type(narrow, np.min_scalar_type(pad_value))
        flat = np.full(int(self.starts[-1]), pad_value, dtype=narrow)
        flat[self.positions] = values  # scattering without a cast is 2-3x faster; widen the result at once
        return flat if dtype is None or flat.dtype == dtype else flat.astype(dtype)

    def mask(self, dtype: Any) -> np.ndarray:
        """The flat attention mask: 1 where a token is, 0 on padding."""
        flat = np.zeros(int(self.starts[-1]), dtype=dtype)
        flat[self.positions] = 1
        return flat


@dataclass(frozen=True)
class PaddedText(BatchSource):
    """A BatchSource of dynamically padded text batches.

    Attributes:
        rows: :class:`TokenizedRows` or :class:`StoredRows`.
        pad_id: the tokenizer's pad id.
        pad_to_multiple_of: each batch's width is its longest row rounded up to this.
        token_type_ids: add ``token_type_ids`` (always for sentence pairs).
        widen_on_device: send ids and masks in their smallest dtypes and make them int64 in
            ``finalize`` (for CUDA: 4x less over the bus); ``False`` pads straight into int64
            in the worker (for CPU: no second pass on the consumer's side).
        tally: the loader's running counts (see report.py).
    """

    rows: Any
    pad_id: int
    pad_to_multiple_of: int = 8
    token_type_ids: bool = False
    widen_on_device: bool = True
    tally: Tally = field(default_factory=Tally)

    def __post_init__(self) -> None:
        if isinstance(self.pad_to_multiple_of, bool) or not isinstance(self.pad_to_multiple_of, int) or self.pad_to_multiple_of < 1:
            raise ConfigError(f"pad_to_multiple_of must be an integer >= 1, got {self.pad_to_multiple_of!r}", option="pad_to_multiple_of")

    def __len__(self) -> int:
        return len(self.rows)

    def batch_bytes(self, batch_size: int) -> float:
        return batch_size * self.rows.bytes_per_row()

    def auto_workers(self, batch_size: int) -> int:
        """Threads to use when the user does not say: none for a store, one per core on the fly.

        From a store, a chunk of text batches is a gather and a few numpy passes over some
        kilobytes, run mostly under the GIL; worker threads only add hand-offs and contention
        (measured on 2 cores, Friends lines, batches of 32: 1.6M rows/s inline vs 1.0-1.2M with
        1 or 2 threads). On the fly, the Rust tokenizer releases the GIL and needs the cores.
        """
        return 0 if isinstance(self.rows, StoredRows) else default_workers()

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, Any]]:
        idx = np.concatenate(chunk) if len(chunk) > 1 else np.asarray(chunk[0])
        enc = self.rows.fetch(idx)
        sizes = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
        grid = PadGrid.of(enc.ids.offsets, sizes, self.pad_to_multiple_of)
        wide = None if self.widen_on_device else np.int64
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
        real = np.add.reduceat(enc.ids.lengths, grid.bounds[:-1]) if len(idx) else np.zeros(len(chunk), np.int64)
        real = np.where(sizes > 0, real, 0).tolist()  # reduceat gives a row's length for an empty batch
        cut = [0] * len(chunk)
        if enc.truncated is not None and len(idx):
            cut = np.where(sizes > 0, np.add.reduceat(enc.truncated.astype(np.int64), grid.bounds[:-1]), 0).tolist()
        out = []
        for k, (a, b, n, w) in enumerate(zip(starts, starts[1:], rows, widths)):
            batch: dict[str, Any] = {"input_ids": ids[a:b].reshape(n, w), "attention_mask": masks[a:b].reshape(n, w)}
            if types is not None:
                batch["token_type_ids"] = types[a:b].reshape(n, w)
            if labels is not None:
                batch["labels"] = labels[bounds[k] : bounds[k + 1]]
            batch[TALLY_KEY] = BatchTally(n, real[k], n * w - real[k], cut[k])
            out.append(batch)
        return out

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        tally = batch.pop(TALLY_KEY, None)
        if tally is not None:
            self.tally.add(tally)
        if not self.widen_on_device:
            return batch
        batch["input_ids"] = batch["input_ids"].long()
        batch["attention_mask"] = batch["attention_mask"].long()
        if "token_type_ids" in batch:
            batch["token_type_ids"] = batch["token_type_ids"].long()
        return batch


__all__ = ["METADATA_KEY", "PadGrid", "PaddedText", "StoredRows", "TokenizedRows"]
