"""Elastic resume, rank-independent state, the rank split, the WORLD_SIZE check, lazy block order (issue 18)."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import ConfigError, StateError
from stoker.loader import distributed_rank
from stoker.pipeline.sampler import FixedBatches, Sampler

OPTS = dict(batch_size=7, shuffle="block", block_size=16, window=2, seed=4, num_workers=0)


@pytest.fixture
def store(tmp_path):
    return stoker.write(tmp_path / "s", {"label": np.arange(300, dtype=np.int64)}, shard_size=64)


def labels(batches) -> list[int]:
    return [int(x) for b in batches for x in b["label"].tolist()]


def heads(store, world, k, epoch=1):
    """Every rank of ``world`` reads ``k`` batches of ``epoch``: their rows and their states."""
    rows, states = [], []
    for r in range(world):
        loader = stoker.Loader(store, rank=r, world_size=world, **OPTS)
        loader.set_epoch(epoch)
        it = iter(loader)
        rows += labels(next(it) for _ in range(k))
        states.append(json.loads(json.dumps(loader.state_dict())))
        it.close()
    return rows, states


def tails(store, world, state):
    loaders = [stoker.Loader(store, rank=r, world_size=world, **OPTS) for r in range(world)]
    for loader in loaders:
        loader.load_state_dict(state)
    parts = [labels(loader) for loader in loaders]
    return [x for p in parts for x in p], {len(p) for p in parts}


def test_every_rank_resumes_rank_0s_state(store):
    head, states = heads(store, 3, 5)
    assert all(s == states[0] for s in states)  # the state is the same on every rank: nothing per rank
    rest, _ = tails(store, 3, states[0])  # was refused: "rank: saved 0, now 1"
    assert Counter(head + rest) == Counter(range(300))


@pytest.mark.parametrize("before,after", [(4, 2), (4, 3), (2, 4), (3, 5)])
def test_a_state_saved_on_n_ranks_resumes_on_m(store, before, after):
    head, states = heads(store, before, 4)
    rest, counts = tails(store, after, states[-1])
    assert len(counts) == 1  # as many batches on every new rank
    left = 300 - 4 * 7 * before
    pad = -left % after  # uneven="pad": the new ranks repeat that many rows from the start of the order
    order = Sampler(300, "block", 4, 16, 2).global_order(1)
    assert Counter(head + rest) == Counter(range(300)) + Counter(order[:pad].tolist())


def test_uneven_drop_and_drop_last_leave_out_only_the_end_of_the_epoch(store):
    opts = {**OPTS, "uneven": "drop", "drop_last": True}
    first = [stoker.Loader(store, rank=r, world_size=4, **opts) for r in range(4)]
    its = [iter(loader) for loader in first]
    head = [x for it in its for x in labels(next(it) for _ in range(3))]
    state = first[0].state_dict()
    second = [stoker.Loader(store, rank=r, world_size=3, **opts) for r in range(3)]
    for loader in second:
        loader.load_state_dict(state)
    seen = head + [x for loader in second for x in labels(loader)]
    assert len(seen) == len(set(seen))  # never twice
    order = Sampler(300, "block", 4, 16, 2).global_order(0).tolist()
    missing = sorted(order.index(x) for x in set(range(300)) - set(seen))
    # 216 rows left after 84: 72 per new rank, 10 batches of 7 each: the last 6 rows of the order are out
    assert missing == list(range(294, 300))


def test_the_split_is_torchs_distributed_sampler_split():
    for n, world, uneven in [(10, 3, "pad"), (10, 3, "drop"), (12, 4, "pad"), (5, 4, "pad")]:
        for r in range(world):
            torch_rows = list(
                torch.utils.data.DistributedSampler(range(n), world, r, shuffle=False, drop_last=uneven == "drop")
            )
            assert Sampler(n, rank=r, world_size=world, uneven=uneven).indices(0).tolist() == torch_rows


def test_resuming_past_the_end_is_refused(store):
    loader = stoker.Loader(store, rank=0, world_size=2, **OPTS)
    state = {**loader.state_dict(), "batches_done": len(loader) + 1}
    with pytest.raises(StateError, match="only 22 batches were left"):
        loader.load_state_dict(state)


def test_a_version_1_state_of_one_rank_still_loads_and_one_of_several_is_refused(store):
    loader = stoker.Loader(store, **OPTS)
    order = {**loader.batch_sampler.fingerprint(), "rank": 0, "world_size": 1}
    loader.load_state_dict({"version": 1, "epoch": 2, "batches_done": 40, "order": order})
    assert loader.epoch == 2 and len(list(loader)) == len(loader) - 40
    with pytest.raises(StateError, match="older stoker on 2 ranks"):
        loader.load_state_dict({"version": 1, "epoch": 2, "batches_done": 4, "order": {**order, "world_size": 2}})


def test_world_size_without_a_process_group_is_refused(store, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ConfigError, match=r"WORLD_SIZE=2 .*rank 1.*init_process_group.*rank= and world_size="):
        stoker.Loader(store, batch_size=4)
    assert distributed_rank(1, 2) == (1, 2)  # explicit ranks are taken as given
    assert len(stoker.Loader(store, batch_size=4, rank=0, world_size=1)) == 75
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed_rank() == (0, 1)


def test_block_order_starts_an_epoch_without_a_per_row_index():
    n = 2_000_000
    fb = FixedBatches(Sampler(n, "block", seed=1, block_size=4096, window=16), 256)
    tracemalloc.start()
    try:
        batches = fb.batches(3)
        first = next(batches)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(first) == 256
    assert peak < n, f"{peak / n:.2f} bytes a row to start an epoch"  # was ~40 bytes a row


def test_block_order_is_lazy_yet_the_same_order_and_seeded():
    s = Sampler(100_003, "block", seed=9, block_size=1000, window=4)
    whole = s.global_order(2)
    assert sorted(whole.tolist()) == list(range(100_003))
    lazy = np.concatenate(list(FixedBatches(s, 333).batches(2)))
    np.testing.assert_array_equal(lazy, whole)
    np.testing.assert_array_equal(whole, Sampler(100_003, "block", seed=9, block_size=1000, window=4).global_order(2))
    assert not np.array_equal(whole, s.global_order(3))


def test_global_order_is_numpys_permutation():
    got = Sampler(5000, "global", seed=12).global_order(7)
    np.testing.assert_array_equal(got, np.random.default_rng([12, 7]).permutation(5000))
