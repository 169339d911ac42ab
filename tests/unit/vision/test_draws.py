"""The per-row random numbers of augmentation: computed a batch at a time, the same as one row at a time."""

from __future__ import annotations

import random

import numpy as np
import pytest

from stoker.vision import RandomResizedCrop
from stoker.vision.draws import PRECOMPUTED, RowRandom, mix
from stoker.vision.transforms import View


def _take(draws, n: int) -> list[float]:
    return [draws.random() for _ in range(n)]


def test_a_batch_draws_what_each_row_draws_alone_past_the_precomputed_ones():
    rng = RowRandom(seed=7, random_transforms=True)
    rng.epoch = 3
    idx = np.array([0, 5, 2**40, 99])
    batch = rng.rows(idx)
    assert batch is not None
    for k, row in enumerate(idx.tolist()):
        assert _take(batch[k], PRECOMPUTED + 9) == _take(rng(row), PRECOMPUTED + 9)


def test_a_large_batch_made_in_row_blocks_draws_what_each_row_draws_alone():
    rng = RowRandom(seed=2, random_transforms=True)
    idx = np.arange(1000, 1200)  # several blocks of rows
    assert [_take(d, 3) for d in rng.rows(idx)] == [_take(rng(int(r)), 3) for r in idx]


def test_a_row_draws_the_same_in_any_batch_and_differs_across_rows_epochs_and_seeds():
    rng = RowRandom(seed=0, random_transforms=True)
    first = _take(rng.rows(np.array([4, 10]))[1], 5)
    assert _take(rng.rows(np.array([10, 11, 12]))[0], 5) == first
    assert _take(rng(11), 5) != first
    rng.epoch = 1
    assert _take(rng(10), 5) != first
    for seed in (1, -1, 2**70, -(2**70)):
        assert _take(RowRandom(seed, True)(10), 5) != first


def test_the_numbers_are_fixed_by_the_formula():
    """SplitMix64 from the seed, then the epoch, then the row: a change of stream must show up here."""
    m, g = 2**64 - 1, 0x9E3779B97F4A7C15
    fold = lambda v: mix((mix(0xBF58476D1CE4E5B9) ^ v) + g & m)  # noqa: E731 (a small non-negative int)
    epoch_key = mix(((mix((fold(5) + g) & m) ^ fold(2)) + g) & m)
    row_key = mix((epoch_key + 3 * g) & m)
    expected = [(mix((row_key + d * g) & m) >> 11) / 2**53 for d in (1, 2)]
    rng = RowRandom(seed=5, random_transforms=True)
    rng.epoch = 2
    assert _take(rng(3), 2) == expected == _take(rng.rows(np.array([3]))[0], 2)


def test_a_seed_equal_to_the_epoch_is_not_a_special_case():
    draws = []
    for n in (3, 5):
        rng = RowRandom(seed=n, random_transforms=True)
        rng.epoch = n
        draws.append(_take(rng(0), 3))
    assert draws[0] != draws[1]


def test_draws_are_uniform_and_crops_follow_torchvisions_scale_range():
    rng = RowRandom(seed=1, random_transforms=True)
    values = np.array([_take(d, 4) for d in rng.rows(np.arange(5000))]).ravel()
    assert values.min() >= 0 and values.max() < 1
    assert abs(values.mean() - 0.5) < 0.01 and abs(np.quantile(values, 0.25) - 0.25) < 0.01
    op = RandomResizedCrop(32)

    def areas(generators) -> np.ndarray:
        views = [op.apply(View.full(300, 400), g) for g in generators]
        return np.array([(v.right - v.left) * (v.bottom - v.top) / (400 * 300) for v in views])

    ours, mersenne = areas(rng.rows(np.arange(2000))), areas(random.Random(i) for i in range(2000))
    assert 0.08 * 0.95 <= ours.min() and ours.max() <= 1.0
    assert ours.mean() == pytest.approx(mersenne.mean(), abs=0.03)  # the crops' distribution is kept
    assert np.median(ours) == pytest.approx(np.median(mersenne), abs=0.04)


def test_nothing_is_drawn_when_no_transform_is_random():
    rng = RowRandom(seed=1, random_transforms=False)
    assert rng.rows(np.arange(3)) is None and rng(1) is None
