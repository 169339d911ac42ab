"""Length bucketing that keeps randomness: a batch sampler for ``stoker.Loader``.

Padding to the longest row of a batch wastes little when a batch's rows have similar
lengths. :class:`LengthBuckets` makes such batches and still changes them every epoch:

* fixed ``batch_size``: shuffle all rows with ``(seed, epoch)``; cut the order into windows
  of ``window`` batches; sort each window by length (ties keep the shuffled order); cut
  batches; shuffle the batches. Every epoch has ``ceil(rows / batch_size)`` batches.
* ``max_tokens`` (a token budget per batch, ``rows x longest <= max_tokens``): sort all rows
  by length with ties broken at random by ``(seed, epoch)``, cut batches greedily at
  boundaries computed once from the sorted lengths (so every epoch has the same number of
  batches), shuffle the batches. Rows of equal length trade places between epochs.

With several ranks, the epoch's batches (identical on every rank) are dealt round-robin, and
every rank gets the same count: ``uneven="pad"`` repeats batches from the start of the
epoch, ``"drop"`` leaves the remainder out. An epoch is a pure function of
``(seed, epoch)``: resuming recomputes it and skips the batches already delivered.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.pipeline.sampler import BatchSampler, field_fingerprint


def _positive(name: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}", option=name)


@dataclass(frozen=True, eq=False)
class LengthBuckets(BatchSampler):
    """Batches of rows of similar length, reshuffled every epoch.

    Attributes:
        lengths: one length per row (tokens, or an estimate such as characters).
        batch_size: rows per batch; with ``max_tokens``, an optional cap (``None``: no cap).
        max_tokens: token budget per batch (``rows x longest``, lengths rounded up to ``round_to``).
        shuffle: reshuffle every epoch; ``False`` gives the same sorted batches in a fixed order.
        seed: base seed; epoch ``e`` uses ``(seed, e)``.
        window: batches sorted together (fixed batch_size only): larger is less padding, less mixing.
        rank, world_size: this rank and the number of ranks sharing each epoch
            (``stoker.loader.distributed_rank()`` gives torch.distributed's).
        uneven: ``"pad"`` or ``"drop"`` when the batches do not split evenly over the ranks.
        round_to: lengths are rounded up to this multiple when checking ``max_tokens``
            (pass the loader's ``pad_to_multiple_of``).
    """

    lengths: np.ndarray
    batch_size: int | None = 32
    max_tokens: int | None = None
    shuffle: bool = True
    seed: int = 0
    window: int = 100
    rank: int = 0
    world_size: int = 1
    uneven: str = "pad"
    round_to: int = 1
    _cuts: np.ndarray = field(init=False, repr=False)
    _sort_keys: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        lengths = np.asarray(self.lengths, dtype=np.int64).reshape(-1)
        object.__setattr__(self, "lengths", lengths)
        if len(lengths) == 0:
            raise ConfigError("cannot make batches of 0 rows; the data is empty", option="lengths")
        if self.max_tokens is None and self.batch_size is None:
            raise ConfigError("give batch_size, max_tokens, or both", option="batch_size")
        if self.batch_size is not None:
            _positive("batch_size", self.batch_size)
        if self.max_tokens is not None:
            _positive("max_tokens", self.max_tokens)
        _positive("window", self.window)
        _positive("round_to", self.round_to)
        _positive("world_size", self.world_size)
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank {self.rank} is not in [0, world_size={self.world_size})", option="rank")
        if self.uneven not in ("pad", "drop"):
            raise ConfigError(f"uneven must be 'pad' or 'drop', not {self.uneven!r}", option="uneven")
        cuts = self._budget_cuts(self.max_tokens) if self.max_tokens is not None else np.empty(0, np.int64)
        object.__setattr__(self, "_cuts", cuts)
        # the lengths in the smallest unsigned dtype: numpy's stable sort is a radix sort up to 16 bits
        keys = lengths.astype(np.uint16) if len(lengths) and 0 <= lengths.min() and lengths.max() < 2**16 else lengths
        object.__setattr__(self, "_sort_keys", keys)
        if self.uneven == "drop" and self.total_batches < self.world_size:
            raise ConfigError(
                f"{self.total_batches} batches cannot be split over {self.world_size} ranks with uneven='drop'",
                option="uneven",
            )

    # -- sizes ------------------------------------------------------------------------------
    @property
    def total_batches(self) -> int:
        """Batches per epoch over all ranks."""
        if self.max_tokens is not None:
            return len(self._cuts) - 1
        return -(-len(self.lengths) // self._fixed_size)

    @property
    def _fixed_size(self) -> int:
        """Rows per batch without ``max_tokens`` (``batch_size`` is then set: ``__post_init__`` checks)."""
        return self.batch_size or len(self.lengths)

    def __len__(self) -> int:
        total, world = self.total_batches, self.world_size
        return -(-total // world) if self.uneven == "pad" else total // world

    def _budget_cuts(self, budget: int) -> np.ndarray:
        """Batch boundaries over the rows sorted by length, greedy under the token budget."""
        sorted_len = np.sort(self.lengths)
        sorted_len = -(-sorted_len // self.round_to) * self.round_to
        n, cap = len(sorted_len), self.batch_size or len(sorted_len)
        cuts = [0]
        start = 0
        while start < n:
            lo, hi = start + 1, min(n, start + cap)  # the batch [start, e) with the largest e that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if (mid - start) * int(sorted_len[mid - 1]) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            start = lo
            cuts.append(start)
        return np.asarray(cuts, dtype=np.int64)

    # -- one epoch ----------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of ``epoch`` in delivery order, over all ranks (identical on every rank)."""
        rng = np.random.default_rng([self.seed, epoch])
        n = len(self.lengths)
        if self.max_tokens is not None:
            ties = rng.random(n) if self.shuffle else np.arange(n)
            order = np.lexsort((ties, self.lengths))
            cuts = self._cuts.tolist()
        else:
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            order = _sort_windows(order, self._sort_keys[order], self.window * self._fixed_size)
            cuts = [*range(0, n, self._fixed_size), n]
        bounds = list(zip(cuts[:-1], cuts[1:]))
        if self.shuffle:
            bounds = [bounds[i] for i in rng.permutation(len(bounds)).tolist()]
        return [order[a:b] for a, b in bounds]

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        """This rank's batches of ``epoch`` from batch ``start`` on."""
        every = self.epoch_batches(epoch)
        per_rank = len(self)
        ids = np.resize(np.arange(len(every)), per_rank * self.world_size)
        mine = ids.reshape(per_rank, self.world_size)[:, self.rank]
        for b in mine[start:].tolist():
            yield every[b]

    def fingerprint(self) -> dict[str, Any]:
        return field_fingerprint(self, kind="LengthBuckets", rows=len(self.lengths))


def _sort_windows(order: np.ndarray, keys: np.ndarray, size: int) -> np.ndarray:
    """``order`` with each run of ``size`` rows sorted by ``keys`` (stable: ties keep their order).

    The same as ``order[np.lexsort((keys, np.arange(n) // size))]``, with one stable sort along
    the rows of a ``(windows, size)`` view instead of a sort of the whole epoch.
    """
    n = len(order)
    full = n - n % size
    out = np.empty_like(order)
    if full:
        within = np.argsort(keys[:full].reshape(-1, size), axis=1, kind="stable")
        within += np.arange(0, full, size)[:, None]
        out[:full] = order[within.reshape(-1)]
    if full < n:
        out[full:] = order[full:][np.argsort(keys[full:], kind="stable")]
    return out


__all__ = ["LengthBuckets"]
