"""The random numbers of augmentation: row ``i`` of epoch ``e`` draws from ``(seed, e, i)``, a batch at a time.

A row's draws are a counter-based stream (SplitMix64): the epoch's key is mixed from the seed and
then the epoch, the row's key is ``mix(epoch key + row * golden)``, and draw ``d`` is
``mix(row key + (d + 1) * golden)``, its top 53 bits as a float in [0, 1). No generator is seeded
per row: :meth:`RowRandom.rows` computes the first :data:`PRECOMPUTED` draws of every row of a
batch in a few numpy operations over the whole batch, and a row that asks for more (a plan with
many retries) gets them from the same formula in Python.
The same row in the same epoch draws the same numbers whatever the batch, the worker count, the
engine or a resume, and the result is the same on every platform (64-bit integer arithmetic only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain

import numpy as np

PRECOMPUTED = 8  # draws per row computed batch-wise: RandomResizedCrop's first two attempts (2 + 2 + 2) and a flip
# numpy releases the GIL in operations on more than 500 elements; on fewer it does not, so the batch's
# draws are made in row blocks this size (a release costs a worker thread up to the switch interval)
_ROWS_PER_BLOCK = 500 // PRECOMPUTED
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_STEPS = (np.arange(1, PRECOMPUTED + 1, dtype=np.uint64) * np.uint64(_GOLDEN))[None, :]  # (d + 1) * golden, wrapped


def mix(z: int) -> int:
    """SplitMix64's finalizer of a 64-bit integer."""
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _mix_array(z: np.ndarray) -> np.ndarray:
    """:func:`mix` of every element of a uint64 array (numpy wraps around like ``& _MASK``)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


def _unit(z: int) -> float:
    return (mix(z) >> 11) * (1.0 / (1 << 53))


def fold(value: int) -> int:
    """A 64-bit key of any Python int (a seed or an epoch of any size or sign)."""
    h = mix(_GOLDEN if value < 0 else _M1)
    value = abs(value)
    while True:
        h = mix((h ^ (value & _MASK)) + _GOLDEN & _MASK)
        value >>= 64
        if not value:
            return h


def _more(key: int, done: int) -> Iterator[float]:
    """A row's draws after its first ``done``, one at a time."""
    while True:
        done += 1
        yield _unit((key + done * _GOLDEN) & _MASK)


class Draws:
    """One row's uniform numbers in [0, 1): ``random()`` returns the next (the interface the transforms call).

    ``random`` is the ``__next__`` of an iterator over the precomputed draws, then :func:`_more`'s: a call
    into C for all but the rare draws past the precomputed ones.
    """

    __slots__ = ("random",)

    def __init__(self, key: int, first: list[float]) -> None:
        self.random: Callable[[], float] = chain(first, _more(key, len(first))).__next__


class RowRandom:
    """The per-row numbers of augmentation for the current ``epoch`` (set by the source before each epoch)."""

    def __init__(self, seed: int, random_transforms: bool) -> None:
        self.seed = seed
        self.active = random_transforms
        self.epoch = 0
        self._base: tuple[int, int] | None = None  # (epoch, key of (seed, epoch))

    def reseed(self, seed: int) -> None:
        """Draw from ``seed`` from now on."""
        self.seed, self._base = seed, None

    def _epoch_key(self) -> int:
        if self._base is None or self._base[0] != self.epoch:
            seeded = mix((fold(self.seed) + _GOLDEN) & _MASK)
            self._base = (self.epoch, mix(((seeded ^ fold(self.epoch)) + _GOLDEN) & _MASK))
        return self._base[1]

    def rows(self, idx: np.ndarray) -> list[Draws] | None:
        """The draws of each row of ``idx`` (one numpy pass for all of them); None when no transform is random."""
        if not self.active:
            return None
        base = np.uint64(self._epoch_key())
        rows = np.asarray(idx, dtype=np.int64).astype(np.uint64)
        out: list[Draws] = []
        for at in range(0, len(rows), _ROWS_PER_BLOCK):
            keys = _mix_array(base + rows[at : at + _ROWS_PER_BLOCK] * np.uint64(_GOLDEN))
            units = (_mix_array(keys[:, None] + _STEPS) >> np.uint64(11)) * (1.0 / (1 << 53))
            out.extend(Draws(k, first) for k, first in zip(keys.tolist(), units.tolist()))
        return out

    def __call__(self, row: int) -> Draws | None:
        """The draws of one ``row``, the same as :meth:`rows` gives it; None when no transform is random."""
        if not self.active:
            return None
        return Draws(mix((self._epoch_key() + int(row) * _GOLDEN) & _MASK), [])


__all__ = ["PRECOMPUTED", "Draws", "RowRandom", "fold", "mix"]
