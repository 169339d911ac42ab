"""Packing for language-model pretraining: documents concatenated into fixed-length blocks.

Each epoch orders the documents by ``(seed, epoch)``, concatenates their ids (special tokens
included) and cuts the stream into blocks of ``block_length`` tokens (the short tail is left out;
nothing is padded). ``position_ids`` restart at 0 where a document starts inside a block.
:class:`PackedBatches` (the batch sampler) yields ``(epoch, block)`` rows per batch, dealt over
the ranks as the core deals rows (``uneven="drop"`` by default here); :class:`PackedText` (the
BatchSource) turns them into ids. Both are pure functions of the epoch, so a resumed loader
continues where it stopped, on any number of ranks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.ranks import digest, store_fingerprint
from stoker.pipeline.sampler import BatchSampler, field_fingerprint
from stoker.pipeline.source import BatchSource
from stoker.store.columns import Ragged
from stoker.text.bucketing import check_ranks, deal, dealt_position
from stoker.text.report import TALLY_KEY, BatchTally, Tally, TextReport


@dataclass(frozen=True)
class Docs:
    """The documents of a :class:`PackedText`: ``fetch(sorted indices) -> (values, starts)``, flat ids
    holding them and where each starts in them; ``fingerprint()``, what the ranks compare of them."""

    fetch: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    fingerprint: Callable[[], str]


def ragged_docs(rag: Ragged) -> Docs:
    """``docs`` for :class:`PackedText` over documents held in memory; their fingerprint hashes every id."""
    return Docs(lambda needed: (rag.values, rag.offsets[needed]), lambda: "ids:" + digest([rag.values, rag.offsets]))


def store_docs(store: Any, column: str = "input_ids") -> Docs:
    """``docs`` for :class:`PackedText` over a store's id column (one gather per batch); their
    fingerprint is the store's content (``store_fingerprint``)."""

    def fetch(needed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rag = store.gather(needed, [column])[column]
        return rag.values, rag.offsets[:-1]

    return Docs(fetch, lambda: f"{store_fingerprint(store)}:{column}")


def _layout(lengths: np.ndarray, shuffle: bool, seed: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """(document order, end of each document in the concatenated stream) for ``epoch``."""
    order = np.random.default_rng([seed, epoch, 1]).permutation(len(lengths)) if shuffle else np.arange(len(lengths))
    return order, np.cumsum(lengths[order])


@dataclass(frozen=True, eq=False)
class PackedBatches(BatchSampler):
    """Batches of block numbers for packed language-model training (a batch sampler).

    Attributes:
        lengths: tokens of each document.
        block_length: tokens per block.
        batch_size: blocks per batch.
        shuffle: a new document order and block order every epoch.
        seed: base seed; epoch ``e`` uses ``(seed, e)``.
        rank, world_size: this rank and the number of ranks (``stoker.loader.distributed_rank()``
            gives torch.distributed's); every rank gets as many blocks.
        drop_last: drop the last batch of a rank's epoch when it is short.
        uneven: when the blocks left do not split evenly over the ranks: ``"drop"`` leaves the
            rest out, ``"pad"`` repeats blocks from the start of the epoch's order.
    """

    lengths: np.ndarray
    block_length: int
    batch_size: int
    shuffle: bool = True
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    drop_last: bool = False
    uneven: str = "drop"

    def __post_init__(self) -> None:
        object.__setattr__(self, "lengths", np.asarray(self.lengths, dtype=np.int64))
        for name in ("block_length", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}", option=name)
        check_ranks(self)
        if self.num_blocks < (self.world_size if self.uneven == "drop" else 1):
            raise EmptyDatasetError(
                f"{int(self.lengths.sum()):,} tokens make {self.num_blocks} blocks of {self.block_length}, fewer than the "
                f"{self.world_size} rank(s); use shorter blocks or more text"
            )

    @property
    def num_blocks(self) -> int:
        return int(self.lengths.sum()) // self.block_length

    def _dealt(self) -> Any:
        """The epoch's blocks dealt over the ranks (positions count blocks of the epoch's order)."""
        return deal(self.num_blocks, self, self.batch_size, self.drop_last)

    def __len__(self) -> int:
        return len(self._dealt())

    def _blocks(self, epoch: int, dealt: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """``(epoch, block)`` rows of the batches ``dealt`` (positions in ``epoch``'s block order)."""
        rng = np.random.default_rng([self.seed, epoch, 2])
        blocks = rng.permutation(self.num_blocks) if self.shuffle else np.arange(self.num_blocks)
        for at in dealt:
            ids = blocks[at]
            yield np.stack([np.full(len(ids), epoch, dtype=np.int64), ids], axis=1)

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        return self._blocks(epoch, self._dealt().batches(epoch, start))

    def position(self, start: int, batches: int, world_size: int) -> int:
        """The position after ``batches`` batches on each of ``world_size`` ranks from position ``start``."""
        return dealt_position(self._dealt(), "blocks", start, batches, world_size)

    def batches_left(self, position: int) -> int:
        return self._dealt().batches_left(position)

    def batches_from(self, epoch: int, position: int) -> Iterator[np.ndarray]:
        return self._blocks(epoch, self._dealt().batches_from(epoch, position))

    def fingerprint(self) -> dict[str, Any]:
        """Every field but the rank and the world size (a position is global)."""
        out = field_fingerprint(self, kind="PackedBatches", docs=len(self.lengths))
        del out["rank"], out["world_size"]
        return out


@dataclass(frozen=True, eq=False)
class PackedText(BatchSource):
    """BatchSource of packed blocks: ``input_ids`` and ``position_ids``, both ``(batch, block_length)``,
    from ``docs`` (:func:`ragged_docs` in memory, :func:`store_docs` from a store)."""

    docs: Docs
    lengths: np.ndarray
    block_length: int
    shuffle: bool = True
    seed: int = 0
    tally: Tally = field(default_factory=Tally)
    _cache: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __len__(self) -> int:
        return int(self.lengths.sum()) // self.block_length

    def batch_bytes(self, batch_size: int) -> float:
        return batch_size * self.block_length * 10.0

    def content_fingerprint(self) -> str:
        """What the ranks compare: the block length and the documents' fingerprint."""
        return f"packed:{self.block_length}:{self.docs.fingerprint()}"

    def _epoch_layout(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if epoch not in self._cache:
                if len(self._cache) >= 2:
                    self._cache.pop(min(self._cache))
                self._cache[epoch] = _layout(self.lengths, self.shuffle, self.seed, epoch)
            return self._cache[epoch]

    def _check(self, pairs: np.ndarray) -> None:
        """Refuse anything but ``(epoch, block)`` rows naming blocks of this source."""
        if pairs.ndim != 2 or pairs.shape[1] != 2 or not len(pairs):
            raise ConfigError(
                f"PackedText reads (epoch, block) rows as PackedBatches makes them; got an array of shape "
                f"{pairs.shape}: {pairs.tolist()!r:.200}",
                option="batch_sampler",
            )
        blocks = pairs[:, 1]
        if blocks.min() < 0 or blocks.max() >= len(self):
            bad = int(blocks.min()) if blocks.min() < 0 else int(blocks.max())
            raise IndexError(f"block {bad} is out of range for {len(self)} blocks of {self.block_length} tokens")

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, Any]]:
        out = []
        for pairs in chunk:
            self._check(pairs)
            order, ends = self._epoch_layout(int(pairs[0, 0]))
            pos = (pairs[:, 1:2] * self.block_length + np.arange(self.block_length)).reshape(-1)
            j = np.searchsorted(ends, pos, side="right")  # which document (in epoch order) each token is in
            doc = order[j]
            within = pos - (ends[j] - self.lengths[doc])
            needed = np.unique(doc)
            values, starts = self.docs.fetch(needed)
            flat = starts[np.searchsorted(needed, doc)] + within
            shape = (len(pairs), self.block_length)
            tally = BatchTally(len(pairs), len(pos), 0, 0)
            out.append(
                {"input_ids": values[flat].reshape(shape), "position_ids": within.reshape(shape), TALLY_KEY: tally}
            )
        return out

    def report(self) -> TextReport:
        """Blocks and tokens delivered so far (nothing is padded)."""
        return self.tally.report()

    def reset_report(self) -> None:
        """Start the counts of delivered batches again from zero."""
        self.tally.reset()

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        self.tally.add(batch.pop(TALLY_KEY))
        batch["input_ids"] = batch["input_ids"].long()
        return batch


__all__ = ["PackedBatches", "PackedText", "ragged_docs", "store_docs"]
