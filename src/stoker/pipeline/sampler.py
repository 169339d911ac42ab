"""Which rows go into which batch, on which rank, in which epoch.

An epoch's order is a pure function of ``(seed, epoch, num_rows, config)`` (``pipeline/orders.py``)
and never of the world size: every rank computes the same global order. A position in the epoch
is a count of rows of that global order, the same number on every rank.

The split over ranks (as ``torch.utils.data.DistributedSampler``): from position ``offset`` on, rank
``r`` of ``W`` takes the rows at positions ``offset + r``, ``offset + r + W``, ``offset + r + 2W``, ...
and cuts them into batches. After every rank delivered ``k`` batches of ``B`` rows the epoch stands
at position ``offset + k*B*W``: the first rows of the global order, whatever ``W`` was. That is what
makes a saved position resumable with another number of ranks (``FixedBatches.position``): the rest
of the epoch is split again over the new ranks.

The end of the epoch (``uneven``, ``drop_last``) is settled by the ranks that reach it: of the ``R``
rows left, ``pad`` gives each rank ``ceil(R/W)`` rows, repeating rows from the start of the epoch's
order; ``drop`` gives each ``floor(R/W)`` and leaves the last ``R mod W`` rows of the order out;
``drop_last`` then drops each rank's short last batch. Nothing is read twice before the end of
the epoch in either case, and no row is skipped except those dropped at the end.

Orders: ``sequential`` (rows 0..n-1), ``global`` (a new permutation every epoch) and ``block``
(for data larger than RAM: blocks of ``block_size`` rows permuted, rows shuffled inside each window
of ``window`` blocks, expanded lazily; see ``pipeline/orders.py``).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from stoker.errors import ConfigError, StateError
from stoker.pipeline.orders import BLOCK_SIZE, ORDERS, WINDOW, EpochOrder

# the most rows whose global order is built ahead, at the end of the epoch before (Sampler._order_ahead)
AHEAD_ROWS = 2**22
AHEAD_KEPT = 4  # orders built ahead that are kept at once (one per loader that ended a pass last)
_AHEAD: dict[tuple[Sampler, int], EpochOrder] = {}
# the most rows a window's batches hold in FixedBatches.window_batches (the loader keeps that many announced)
WINDOW_BATCHES_ROWS = 2**20

__all__ = ["ORDERS", "BatchSampler", "FixedBatches", "Sampler", "field_fingerprint", "order_name"]


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
        uneven: when the rows left are not a multiple of ``world_size``: ``pad`` repeats rows from
            the start of the epoch order so every rank gets the same count; ``drop`` leaves the
            remainder out (see the module docstring).
    """

    num_rows: int
    order: str = "sequential"
    seed: int = 0
    block_size: int = BLOCK_SIZE
    window: int = WINDOW
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

    def rows_per_rank(self, offset: int = 0) -> int:
        """Rows each rank gets of the epoch's rest from position ``offset`` on (``uneven`` applied)."""
        left = max(0, self.num_rows - offset)
        return -(-left // self.world_size) if self.uneven == "pad" else left // self.world_size

    def epoch_order(self, epoch: int) -> EpochOrder:
        """The epoch's order of all rows (lazy for ``block``), identical on every rank.

        The order :meth:`batches` made ahead, at the end of the epoch before, is handed out once."""
        ahead = _AHEAD.pop((self, epoch), None)
        if ahead is not None:
            return ahead
        return EpochOrder(self.num_rows, self.order, self.seed, epoch, self.block_size, self.window)

    def _order_ahead(self, epoch: int) -> None:
        """Build epoch ``epoch``'s order now, for the next :meth:`epoch_order`: called when a pass has
        taken its last batch, while the reads in flight still run, so that the next pass does not
        start with a permutation. Only for orders of at most ``AHEAD_ROWS``
        rows: a larger permutation would double the memory held for an epoch that may never come.
        Kept by value (equal samplers have equal orders), for the last ``AHEAD_KEPT`` samplers."""
        if self.order == "global" and self.num_rows <= AHEAD_ROWS:
            _AHEAD[(self, epoch)] = self.epoch_order(epoch)
            while len(_AHEAD) > AHEAD_KEPT:
                _AHEAD.pop(next(iter(_AHEAD)), None)

    def global_order(self, epoch: int) -> np.ndarray:
        """The epoch's order of all rows as one array (``num_rows`` int64: for tests and analysis)."""
        return self.epoch_order(epoch).rows(0, self.num_rows)

    def _take(self, order: EpochOrder, offset: int, first: int, count: int) -> np.ndarray:
        """This rank's rows number ``first..first+count-1`` of the rest from ``offset``."""
        world, n = self.world_size, self.num_rows
        begin = offset + self.rank + world * first
        if world == 1 and begin + count <= n:  # one rank, no padding: a run of the order
            return order.rows(begin, begin + count)
        positions = np.arange(begin, begin + world * count, world, dtype=np.int64)
        if count and positions[-1] >= n:  # padding: rows again from the start of the order
            beyond = positions >= n
            positions[beyond] = (positions[beyond] - n) % n
        return order.take(positions)

    def indices(self, epoch: int, offset: int = 0) -> np.ndarray:
        """This rank's rows for ``epoch`` from position ``offset`` on, in order."""
        return self._take(self.epoch_order(epoch), offset, 0, self.rows_per_rank(offset))

    def num_batches(self, batch_size: int, drop_last: bool, offset: int = 0) -> int:
        n = self.rows_per_rank(offset)
        return n // batch_size if drop_last else -(-n // batch_size)

    def batches(
        self, epoch: int, batch_size: int, drop_last: bool, start: int = 0, offset: int = 0
    ) -> Iterator[np.ndarray]:
        """Index arrays of this rank's batches for ``epoch`` from position ``offset``, from batch ``start`` on.

        Rows are expanded per batch: the epoch start costs what the order costs (``EpochOrder``),
        never a per-rank index of the whole epoch.
        """
        order = self.epoch_order(epoch)
        per_rank = self.rows_per_rank(offset)
        for b in range(start, self.num_batches(batch_size, drop_last, offset)):
            first = b * batch_size
            yield self._take(order, offset, first, min(batch_size, per_rank - first))
        self._order_ahead(epoch + 1)

    def position(self, batch_size: int, batches: int, offset: int = 0) -> int:
        """The epoch's position after every rank delivered ``batches`` batches from position ``offset``."""
        taken = min(batches * batch_size, self.rows_per_rank(offset))
        return min(self.num_rows, offset + taken * self.world_size)

    def fingerprint(self) -> dict[str, Any]:
        """What a saved position must agree with to be resumed here: every field but the rank and
        the world size (a position is global, so any rank of any world size can resume it)."""
        out = field_fingerprint(self)
        del out["rank"], out["world_size"]
        return out


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


class BatchSampler:
    """Base class of every batch sampler: which rows form each batch of an epoch, on this rank.

    Subclasses define ``__len__`` (batches per epoch on this rank, the same on every rank),
    ``batches(epoch, start)`` (index arrays from batch ``start`` on, a pure function of the
    epoch, so a resumed run recomputes them) and ``fingerprint()`` (a JSON-able dict of what a
    saved position must agree with). ``check_fingerprint`` is shared.

    Positions (what the loader saves): by default a position is this rank's count of batches,
    so a saved state resumes only on the same rank of the same world size (the fingerprint
    should then name ``rank`` and ``world_size``). An elastic sampler (``FixedBatches``; the text
    samplers ``LengthBuckets`` and ``PackedBatches``) overrides ``position``, ``batches_left`` and
    ``batches_from`` with positions in the epoch's global order.
    """

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} must define batches(epoch, start)")

    def fingerprint(self) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must define fingerprint()")

    def position(self, start: int, batches: int, world_size: int) -> int:
        """The position after ``batches`` batches per rank of a pass over ``world_size`` ranks that
        began at position ``start``. Raises StateError when the epoch has fewer batches."""
        if start + batches > len(self):
            raise StateError(f"cannot resume at batch {start + batches}: an epoch has {len(self)} batches")
        return start + batches

    def batches_left(self, position: int) -> int:
        """This rank's batches from ``position`` to the end of the epoch."""
        return max(0, len(self) - position)

    def batches_from(self, epoch: int, position: int) -> Iterator[np.ndarray]:
        """This rank's batches of ``epoch`` from ``position`` on."""
        return self.batches(epoch, position)

    def window_batches(self) -> int:
        """How many consecutive batches of this rank draw their rows from one stretch of the data
        (a window of ``shuffle="block"``): reading the first of them may need any row of the
        stretch. A source that fetches its data (a remote store) is told half this many batches
        ahead (see the loader), so the next stretch's data arrives while this one is read. 1 by
        default: batches drawn independently of each other."""
        return 1

    def check_fingerprint(self, saved: dict[str, Any]) -> None:
        """Raise StateError naming every field where ``saved`` differs from this sampler's."""
        mine = self.fingerprint()
        if not isinstance(saved, dict):
            raise StateError(f"cannot resume: the saved order is not a dict ({saved!r:.100})")
        diff = {k: (saved.get(k), v) for k, v in mine.items() if saved.get(k) != v}
        if diff:
            detail = ", ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in diff.items())
            if set(diff) <= {"block_size", "window"}:  # sized to another machine's memory (pipeline/blocks.py)
                sizes = f"block_size={saved.get('block_size')}, window={saved.get('window')}"
                detail += f"; shuffle='block' sized them to each machine's memory: pass {sizes} to resume here"
            raise StateError(f"cannot resume: the saved position was taken with a different order ({detail})")


@dataclass(frozen=True)
class FixedBatches(BatchSampler):
    """Batches of ``batch_size`` rows in the order of ``sampler``: the default batch sampler.

    Elastic: its positions count rows of the epoch's global order (see the module docstring), so
    a position saved on any rank of ``N`` ranks resumes on ``M`` ranks, every row once.
    """

    sampler: Sampler
    batch_size: int
    drop_last: bool = False

    def __post_init__(self) -> None:
        if self.batch_size <= 0:
            raise ConfigError(f"batch_size must be > 0, got {self.batch_size}", option="batch_size")

    @property
    def rank(self) -> int:
        return self.sampler.rank

    @property
    def world_size(self) -> int:
        return self.sampler.world_size

    def __len__(self) -> int:
        return self.sampler.num_batches(self.batch_size, self.drop_last)

    def batches(self, epoch: int, start: int = 0) -> Iterator[np.ndarray]:
        return self.sampler.batches(epoch, self.batch_size, self.drop_last, start)

    def position(self, start: int, batches: int, world_size: int) -> int:
        """The global position after ``batches`` batches on each of ``world_size`` ranks from ``start``."""
        if not 0 <= start <= self.sampler.num_rows:
            raise StateError(f"cannot resume at position {start}: the epoch has {self.sampler.num_rows} rows")
        then = replace(self.sampler, rank=0, world_size=world_size)
        there = then.num_batches(self.batch_size, self.drop_last, start)
        if batches > there:
            raise StateError(
                f"cannot resume after {batches} batches from position {start} on {world_size} rank(s): "
                f"only {there} batches were left there"
            )
        return then.position(self.batch_size, batches, start)

    def batches_left(self, position: int) -> int:
        return self.sampler.num_batches(self.batch_size, self.drop_last, position)

    def batches_from(self, epoch: int, position: int) -> Iterator[np.ndarray]:
        return self.sampler.batches(epoch, self.batch_size, self.drop_last, 0, position)

    def window_batches(self) -> int:
        """For ``block`` order, the batches of this rank in one window (``block_size * window`` rows of
        the epoch's order, shared by the ranks), at most :data:`WINDOW_BATCHES_ROWS` rows' worth;
        1 for the other orders (``global``: every batch draws from the whole epoch; ``sequential``:
        from the rows after the last)."""
        s = self.sampler
        if s.order != "block":
            return 1
        rows = min(s.block_size * s.window, s.num_rows) / s.world_size
        return max(1, math.ceil(min(rows, WINDOW_BATCHES_ROWS) / self.batch_size))

    def fingerprint(self) -> dict[str, Any]:
        return {**self.sampler.fingerprint(), "batch_size": self.batch_size, "drop_last": self.drop_last}
