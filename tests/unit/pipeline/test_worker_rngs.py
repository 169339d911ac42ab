"""Worker processes draw their own random numbers (pipeline/work.py: seed_globals).

Forked workers start as copies of the consumer, numpy's and torch's global generators included, and
a pool forked again each epoch starts from the same state: two workers drew the same "random"
augmentations (32 distinct numpy draws of 64), and every epoch repeated the last one's (64 of 64 rows
drew the same as the epoch before). Python's ``random`` reseeds itself after a fork; numpy and torch
do not.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import stoker


class Draws(torch.utils.data.Dataset):
    """Each sample: its index and one draw of each global generator (a random augmentation's)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> dict:
        return {"i": i, "np": np.random.rand(), "torch": torch.rand(()).item(), "py": random.random()}


def _epochs(loader, epochs: int = 2) -> list[dict[int, tuple[float, float, float]]]:
    out = []
    for _ in range(epochs):
        rows = {}
        for b in loader:
            for i, a, t, p in zip(b["i"].tolist(), b["np"].tolist(), b["torch"].tolist(), b["py"].tolist()):
                rows[i] = (a, t, p)
        assert sorted(rows) == list(range(64))
        out.append(rows)
    return out


@pytest.mark.parametrize("persistent", [False, True])
def test_no_two_workers_or_epochs_repeat_draws(persistent):
    loader = stoker.Loader(Draws(), batch_size=4, num_workers=2, engine="processes", persistent_workers=persistent)
    draws = [v for rows in _epochs(loader) for v in rows.values()]
    for k, name in enumerate(("numpy", "torch", "random")):
        assert len({d[k] for d in draws}) == len(draws), f"{name} draws repeat across workers or epochs"


def test_the_same_seed_gives_the_same_draws_and_another_seed_others():
    def run(seed):
        return _epochs(stoker.Loader(Draws(), batch_size=4, num_workers=2, engine="processes", seed=seed), 1)[0]

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert all(first[i][0] != other[i][0] for i in range(64))


def test_the_consumer_s_generators_are_left_alone():
    np.random.seed(5)
    expected = np.random.rand()
    np.random.seed(5)
    _epochs(stoker.Loader(Draws(), batch_size=4, num_workers=2, engine="processes"), 1)
    assert np.random.rand() == expected


def test_convert_dataset_workers_do_not_repeat_draws(tmp_path):
    class Noise(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> dict:
            return {"x": np.random.rand(3).astype(np.float32)}

    stoker.convert.dataset(Noise(), tmp_path / "s", workers=2, chunk_size=4)
    x = stoker.open(tmp_path / "s").gather(np.arange(64), ["x"])["x"]
    assert len({tuple(r) for r in x.tolist()}) == 64
