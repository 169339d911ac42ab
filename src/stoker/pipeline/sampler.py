"""Which rows go into which batch, on which rank, in which epoch.

An epoch's order is a pure function of ``(seed, epoch, num_rows, config)``: every rank
computes the same global order and keeps its own contiguous share, and a resumed run
recomputes the order and skips the batches already delivered. Nothing here depends on
how many workers read the data, so a run can resume with a different worker count.

Orders:

* ``sequential``: rows 0..n-1.
* ``global``: a fresh permutation of all rows every epoch.
* ``block``: for data larger than RAM. Rows are cut into blocks of ``block_size``
  contiguous rows; blocks are permuted; then rows are permuted inside each window of
  ``window`` consecutive (permuted) blocks. Reads stay within a few blocks at a time while
  every row can still land anywhere in the epoch.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from stoker.errors import ConfigError, StateError

ORDERS = ("sequential", "global", "block")


def order_name(shuffle: bool | str) -> str:
    """Map the DataLoader-style ``shuffle`` argument to an order name."""
    if shuffle is False or shuffle is None or shuffle == "sequential":
        return "sequential"
    if shuffle is True or shuffle == "global":
        return "global"
    if shuffle == "block":
        return "block"
    raise ConfigError(f"shuffle must be True, False, 'global' or 'block', not {shuffle!r}", option="shuffle")


@dataclass(frozen=True)
class Sampler:
    """The per-epoch index order of one rank.

    Attributes:
        num_rows: rows in the dataset.
        order: ``sequential``, ``global`` or ``block``.
        seed: base seed; epoch ``e`` uses the stream ``(seed, e)``.
        block_size: rows per block for ``block`` order.
        window: blocks shuffled together for ``block`` order.
        rank: this process's rank.
        world_size: number of ranks sharing the epoch.
        uneven: when ``num_rows`` is not a multiple of ``world_size``: ``pad`` repeats rows from
            the start of the epoch order so every rank gets the same count; ``drop`` leaves the
            remainder out.
    """

    num_rows: int
    order: str = "sequential"
    seed: int = 0
    block_size: int = 4096
    window: int = 16
    rank: int = 0
    world_size: int = 1
    uneven: str = "pad"

    def __post_init__(self) -> None:
        if self.num_rows <= 0:
            raise ConfigError(f"cannot sample from {self.num_rows} rows; the dataset is empty", option="num_rows")
        if self.order not in ORDERS:
            raise ConfigError(f"order must be one of {ORDERS}, not {self.order!r}", option="order")
        if self.block_size <= 0 or self.window <= 0:
            raise ConfigError(
                f"block_size and window must be positive, got {self.block_size}, {self.window}", option="block_size"
            )
        if self.world_size <= 0 or not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank {self.rank} is not in [0, world_size={self.world_size})", option="rank")
        if self.uneven not in ("pad", "drop"):
            raise ConfigError(f"uneven must be 'pad' or 'drop', not {self.uneven!r}", option="uneven")
        if self.uneven == "drop" and self.num_rows < self.world_size:
            raise ConfigError(
                f"{self.num_rows} rows cannot be split over {self.world_size} ranks with uneven='drop'", option="uneven"
            )

    @property
    def samples_per_rank(self) -> int:
        if self.uneven == "pad":
            return -(-self.num_rows // self.world_size)
        return self.num_rows // self.world_size

    def global_order(self, epoch: int) -> np.ndarray:
        """The epoch's order of all rows, identical on every rank."""
        n = self.num_rows
        if self.order == "sequential":
            return np.arange(n, dtype=np.int64)
        rng = np.random.default_rng([self.seed, epoch])
        if self.order == "global":
            return rng.permutation(n).astype(np.int64, copy=False)
        return _block_order(n, self.block_size, self.window, rng)

    def indices(self, epoch: int) -> np.ndarray:
        """This rank's rows for ``epoch``, in order."""
        order = self.global_order(epoch)
        per_rank = self.samples_per_rank
        total = per_rank * self.world_size
        if total > len(order):
            order = np.concatenate([order, np.resize(order, total - len(order))])
        return order[self.rank * per_rank : (self.rank + 1) * per_rank]

    def num_batches(self, batch_size: int, drop_last: bool) -> int:
        n = self.samples_per_rank
        return n // batch_size if drop_last else -(-n // batch_size)

    def batches(self, epoch: int, batch_size: int, drop_last: bool, start: int = 0) -> Iterator[np.ndarray]:
        """Index arrays of this rank's batches for ``epoch``, from batch ``start`` on."""
        idx = self.indices(epoch)
        for b in range(start, self.num_batches(batch_size, drop_last)):
            yield idx[b * batch_size : (b + 1) * batch_size]

    def fingerprint(self) -> dict[str, Any]:
        """What a saved position must agree with to be resumed here: every field."""
        return field_fingerprint(self)


def field_fingerprint(sampler: Any, **first: Any) -> dict[str, Any]:
    """The fingerprint of a dataclass sampler: ``first``, then each of its init fields by name, in
    field order; an array field as the CRC-32 of its bytes (``lengths`` -> ``lengths_crc32``)."""
    out = dict(first)
    for f in fields(sampler):
        if f.init:
            value = getattr(sampler, f.name)
            if isinstance(value, np.ndarray):
                out[f"{f.name}_crc32"] = zlib.crc32(value.tobytes())
            else:
                out[f.name] = value
    return out


def _block_order(n: int, block_size: int, window: int, rng: np.random.Generator) -> np.ndarray:
    num_blocks = -(-n // block_size)
    blocks = rng.permutation(num_blocks).astype(np.int64)
    starts = blocks * block_size
    lengths = np.minimum(block_size, n - starts)
    ends = np.cumsum(lengths)
    rows = np.repeat(starts - (ends - lengths), lengths) + np.arange(n, dtype=np.int64)
    # window id of every row, then a random key inside it: sort by (window, key)
    window_of_block = np.arange(num_blocks) // window
    window_of_row = np.repeat(window_of_block, lengths)
    keys = rng.random(n)
    return rows[np.lexsort((keys, window_of_row))]


class BatchSampler:
    """Base class of every batch sampler: which rows form each batch of an epoch, on this rank.

    Subclasses define ``__len__`` (batches per epoch on this rank, the same on every rank),
    ``batches(epoch, start)`` (index arrays from batch ``start`` on, a pure function of the
    epoch, so a resumed run recomputes them) and ``fingerprint()`` (a JSON-able dict of what a
    saved position must agree with). ``check_fingerprint`` is shared.
    """

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} must define batches(epoch, start)")

    def fingerprint(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must define fingerprint()")

    def check_fingerprint(self, saved: dict[str, Any]) -> None:
        """Raise StateError naming every field where ``saved`` differs from this sampler's."""
        mine = self.fingerprint()
        if not isinstance(saved, dict):
            raise StateError(f"cannot resume: the saved order is not a dict ({saved!r:.100})")
        diff = {k: (saved.get(k), v) for k, v in mine.items() if saved.get(k) != v}
        if diff:
            detail = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in diff.items())
            raise StateError(f"cannot resume: the saved position was taken with a different order ({detail})")


@dataclass(frozen=True)
class FixedBatches(BatchSampler):
    """Batches of ``batch_size`` rows in the order of ``sampler``: the default batch sampler."""

    sampler: Sampler
    batch_size: int
    drop_last: bool = False

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ConfigError(f"batch_size must be > 0, got {self.batch_size}", option="batch_size")

    def __len__(self) -> int:
        return self.sampler.num_batches(self.batch_size, self.drop_last)

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        return self.sampler.batches(epoch, self.batch_size, self.drop_last, start)

    def fingerprint(self) -> dict[str, Any]:
        return {**self.sampler.fingerprint(), "batch_size": self.batch_size, "drop_last": self.drop_last}
