"""Length bucketing that keeps randomness: :class:`LengthBuckets`, a batch sampler for ``stoker.Loader``.

* fixed ``batch_size``: rows shuffled by ``(seed, epoch)``, cut into windows of ``window``
  batches, each window sorted by length (stable) and cut into batches; the windows come in a
  shuffled order, each window's batches shuffled. The epoch's first window is cut at
  :data:`LEAD_CUTS` into runs delivered one after the other, so the first batch waits for its own
  rows' lengths only. Every epoch has ``ceil(rows / batch_size)`` batches.
* ``max_tokens`` (``rows x longest <= max_tokens``): all rows sorted by length (ties broken by
  ``(seed, epoch)``), cut greedily at boundaries fixed once from the sorted lengths, the batches
  shuffled.

The epoch's batches are the same on every rank and dealt over the ranks as the core deals rows
(:func:`deal`; a position is global), so a state saved on ``N`` ranks resumes on ``M``. Lengths
may be streamed (:class:`StreamedLengths`): the sampler tells the stream the windows it needs in
order (``plan``) and waits for each when its first batch is due (``wait``); the batches are those
of the same lengths given as an array. ``max_tokens`` and :meth:`LengthBuckets.fingerprint` wait
for every length (``all``). More in ``docs/history/text-notes.md``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from stoker.errors import ConfigError, StateError
from stoker.pipeline.sampler import BatchSampler, FixedBatches, Sampler, field_fingerprint

LEAD_CUTS = np.array([1, 2, 4, 8, 16, 32])  # the epoch's first window is cut after these batches (by number)


def window_major(rng: np.random.Generator, count: int, window: int) -> np.ndarray:
    """The delivery order of ``count`` batches cut from windows of ``window`` batches: the windows
    in a random order, the batches of each in a random order (batch ``b`` is in window ``b // window``)."""
    windows = -(-count // window)
    rank = np.empty(windows, dtype=np.int64)
    rank[rng.permutation(windows)] = np.arange(windows)
    return np.lexsort((rng.random(count), rank[np.arange(count) // window]))


def _positive(name: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}", option=name)


def check_ranks(sampler: Any) -> None:
    """Refuse a ``sampler`` whose ``world_size``, ``rank`` or ``uneven`` is not one the core deals by."""
    _positive("world_size", sampler.world_size)
    if not 0 <= sampler.rank < sampler.world_size:
        raise ConfigError(f"rank {sampler.rank} is not in [0, world_size={sampler.world_size})", option="rank")
    if sampler.uneven not in ("pad", "drop"):
        raise ConfigError(f"uneven must be 'pad' or 'drop', not {sampler.uneven!r}", option="uneven")


def deal(units: int, sampler: Any, per_batch: int = 1, drop_last: bool = False) -> FixedBatches:
    """The epoch's ``units`` (batches, packed blocks) dealt over ``sampler``'s ranks as the core
    deals rows, ``per_batch`` to a batch: positions count units of the epoch's order."""
    order = Sampler(units, "sequential", rank=sampler.rank, world_size=sampler.world_size, uneven=sampler.uneven)
    return FixedBatches(order, per_batch, drop_last)


def dealt_position(dealt: FixedBatches, unit: str, start: int, batches: int, world_size: int) -> int:
    """The global position after ``batches`` batches on each of ``world_size`` ranks from ``start``
    (a count of ``unit``), or a StateError when no such run can have been."""
    n = dealt.sampler.num_rows
    if not 0 <= start <= n:
        raise StateError(f"cannot resume at position {start}: an epoch has {n} {unit}")
    if dealt.sampler.uneven == "drop" and world_size > n:
        raise StateError(f"cannot resume: {n} {unit} cannot have been split over {world_size} ranks")
    return dealt.position(start, batches, world_size)


@runtime_checkable
class StreamedLengths(Protocol):
    """Lengths learned while batches are handed out (:class:`~stoker.text.cache.TokenCache`)."""

    def __len__(self) -> int: ...

    def known(self) -> np.ndarray | None:
        """Every length when all are known now, else None (never waits)."""

    def wait(self, rows: np.ndarray) -> np.ndarray:
        """The lengths of ``rows`` (int64), waiting until they are known."""

    def plan(self, blocks: Iterable[np.ndarray]) -> None:
        """The order in which blocks of rows will be waited for (a hint)."""

    def all(self) -> np.ndarray:
        """Every length (int64), waiting until all are known."""


@dataclass(frozen=True, eq=False)
class LengthBuckets(BatchSampler):
    """Batches of rows of similar length, reshuffled every epoch.

    Attributes:
        lengths: one length per row (tokens, or an estimate such as characters), or a
            :class:`StreamedLengths` learned while the first batches are handed out.
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

    lengths: Any
    batch_size: int | None = 32
    max_tokens: int | None = None
    shuffle: bool = True
    seed: int = 0
    window: int = 100
    rank: int = 0
    world_size: int = 1
    uneven: str = "pad"
    round_to: int = 1
    _known: np.ndarray | None = field(init=False, repr=False, default=None)
    _cuts: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.lengths, StreamedLengths):
            lengths = np.asarray(self.lengths, dtype=np.int64).reshape(-1)
            object.__setattr__(self, "lengths", lengths)
            object.__setattr__(self, "_known", lengths)
        if len(self.lengths) == 0:
            raise ConfigError("cannot make batches of 0 rows; the data is empty", option="lengths")
        if self.max_tokens is None and self.batch_size is None:
            raise ConfigError("give batch_size, max_tokens, or both", option="batch_size")
        if self.batch_size is not None:
            _positive("batch_size", self.batch_size)
        if self.max_tokens is not None:
            _positive("max_tokens", self.max_tokens)
        _positive("window", self.window)
        _positive("round_to", self.round_to)
        check_ranks(self)
        if self.uneven == "drop" and self.total_batches < self.world_size:
            raise ConfigError(
                f"{self.total_batches} batches cannot be split over {self.world_size} ranks with uneven='drop'",
                option="uneven",
            )

    # -- lengths ------------------------------------------------------------------------------
    def _all_lengths(self) -> np.ndarray:
        """Every length (a streamed one: waits until all are known)."""
        known = self._known
        if known is None:
            known = np.asarray(self.lengths.all(), dtype=np.int64)
            object.__setattr__(self, "_known", known)
        return known

    def _keys(self, rows: np.ndarray) -> np.ndarray:
        """The lengths of ``rows`` as sort keys (16-bit when they fit: numpy's stable sort is then a radix sort)."""
        if self._known is None:
            known = self.lengths.known()
            if known is not None:
                object.__setattr__(self, "_known", np.asarray(known, dtype=np.int64))
        got = self.lengths.wait(rows) if self._known is None else self._known[rows]
        if len(got) and 0 <= got.min() and got.max() < 2**16:
            return got.astype(np.uint16)
        return got

    # -- sizes ------------------------------------------------------------------------------
    @property
    def total_batches(self) -> int:
        """Batches per epoch over all ranks (with ``max_tokens``: waits for every length)."""
        if self.max_tokens is not None:
            return len(self._budget_cuts()) - 1
        return -(-len(self.lengths) // self._fixed_size)

    @property
    def _fixed_size(self) -> int:
        """Rows per batch without ``max_tokens`` (``batch_size`` is then set: ``__post_init__`` checks)."""
        return self.batch_size or len(self.lengths)

    def __len__(self) -> int:
        return len(deal(self.total_batches, self))

    def _budget_cuts(self) -> np.ndarray:
        """Batch boundaries over the rows sorted by length, greedy under the token budget (computed once)."""
        if self._cuts is not None:
            return self._cuts
        budget = int(self.max_tokens or 0)
        sorted_len = np.sort(self._all_lengths())
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
        computed = np.asarray(cuts, dtype=np.int64)
        object.__setattr__(self, "_cuts", computed)
        return computed

    # -- one epoch ----------------------------------------------------------------------------
    def _budget_batches(self, epoch: int) -> list[np.ndarray]:
        """All ``max_tokens`` batches of ``epoch`` in delivery order."""
        rng = np.random.default_rng([self.seed, epoch])
        lengths = self._all_lengths()
        n = len(lengths)
        ties = rng.random(n) if self.shuffle else np.arange(n)
        order = np.lexsort((ties, lengths))
        cuts = self._budget_cuts().tolist()
        bounds = list(zip(cuts[:-1], cuts[1:]))
        if self.shuffle:
            bounds = [bounds[i] for i in rng.permutation(len(bounds)).tolist()]
        return [order[a:b] for a, b in bounds]

    def _fixed_batches(self, epoch: int, positions: np.ndarray) -> Iterator[np.ndarray]:
        """The batches at ``positions`` of ``epoch``'s delivery order (fixed ``batch_size``; see the
        module doc). Rows are sorted only when their window's (or run's) first batch is due, and
        streamed lengths are told the runs in the order they will be needed."""
        rng = np.random.default_rng([self.seed, epoch])
        n, size = len(self.lengths), self._fixed_size
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        count = -(-n // size)
        full = window_major(rng, count, self.window) if self.shuffle else np.arange(count)
        # the epoch's first window (of several) is cut into runs (by batch number), delivered run by run
        lead = int(full[0]) // self.window
        first, top = lead * self.window, min((lead + 1) * self.window, count)
        cuts = first + LEAD_CUTS if count > self.window else LEAD_CUTS[:0]
        edges = np.concatenate([[first], cuts[cuts < top], [top]])  # the runs: edges[k] .. edges[k + 1]
        head = full[: np.count_nonzero(full // self.window == lead)]  # window-major: the lead window's batches
        full[: len(head)] = head[np.argsort(np.searchsorted(edges, head, side="right"), kind="stable")]
        wanted = full[positions]
        windows = wanted // self.window
        begin = windows * self.window
        run = np.clip(np.searchsorted(edges, wanted, side="right"), 1, len(edges) - 1)
        lead_run = windows == lead
        starts = np.where(lead_run, edges[run - 1], begin)
        ends = np.where(lead_run, edges[run], np.minimum(begin + self.window, count))
        if self._known is None:
            _, first_of = np.unique(starts, return_index=True)
            need = np.sort(first_of).tolist()
            self.lengths.plan(order[starts[i] * size : ends[i] * size] for i in need)
        ready: dict[int, np.ndarray] = {}
        for b, a, e in zip(wanted.tolist(), starts.tolist(), ends.tolist()):
            rows = ready.get(a)
            if rows is None:
                rows = order[a * size : e * size]
                rows = ready[a] = rows[np.argsort(self._keys(rows), kind="stable")]
            k = (b - a) * size
            yield rows[k : k + size]

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of ``epoch`` in delivery order, over all ranks (identical on every rank)."""
        if self.max_tokens is not None:
            return self._budget_batches(epoch)
        return list(self._fixed_batches(epoch, np.arange(self.total_batches)))

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        """This rank's batches of ``epoch`` from this rank's batch ``start`` on."""
        return self._deliver(epoch, deal(self.total_batches, self).sampler.indices(epoch)[start:])

    def _deliver(self, epoch: int, ids: np.ndarray) -> Iterator[np.ndarray]:
        """The batches numbered ``ids`` of ``epoch``'s order, in that order."""
        if self.max_tokens is None:
            yield from self._fixed_batches(epoch, ids)
            return
        every = self._budget_batches(epoch)
        for b in ids.tolist():
            yield every[b]

    # -- elastic positions (BatchSampler): counts of the epoch's batches, the same on every rank ---
    def position(self, start: int, batches: int, world_size: int) -> int:
        """The position after ``batches`` batches on each of ``world_size`` ranks from position ``start``."""
        return dealt_position(deal(self.total_batches, self), "batches", start, batches, world_size)

    def batches_left(self, position: int) -> int:
        return deal(self.total_batches, self).batches_left(position)

    def batches_from(self, epoch: int, position: int) -> Iterator[np.ndarray]:
        return self._deliver(epoch, deal(self.total_batches, self).sampler.indices(epoch, position))

    def fingerprint(self) -> dict[str, Any]:
        """Every field but the rank and the world size (a position is global); the lengths as
        the CRC-32 of their int64 bytes (streamed ones: waits for all); ``order``: the batch order's
        rule (a state saved under the earlier global batch shuffle is refused, not resumed wrong)."""
        out = field_fingerprint(
            self,
            kind="LengthBuckets",
            rows=len(self.lengths),
            order="window-major, first window in runs of 1-1-2-4-8-16",
        )
        del out["rank"], out["world_size"]
        if "lengths" in out:  # streamed: the same CRC an array of these lengths gives
            del out["lengths"]
            out["lengths_crc32"] = zlib.crc32(self._all_lengths().tobytes())
        return out


__all__ = ["LEAD_CUTS", "LengthBuckets", "StreamedLengths", "check_ranks", "deal", "dealt_position", "window_major"]
