"""The sampler's promises: permutations, rank partitions, and exact resume."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stoker
from stoker.pipeline.sampler import FixedBatches, Sampler

orders = st.sampled_from(["sequential", "global", "block"])


@given(
    n=st.integers(1, 3000),
    order=orders,
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 50),
    block=st.integers(1, 300),
    window=st.integers(1, 8),
)
def test_epoch_is_a_permutation(n, order, seed, epoch, block, window):
    got = Sampler(n, order, seed, block, window).indices(epoch)
    np.testing.assert_array_equal(np.sort(got), np.arange(n))


@given(
    n=st.integers(1, 2000),
    world=st.integers(1, 8),
    order=orders,
    seed=st.integers(0, 1000),
    batch=st.integers(1, 64),
    drop_last=st.booleans(),
)
def test_ranks_partition_the_epoch(n, world, order, seed, batch, drop_last):
    samplers = [Sampler(n, order, seed, 64, 4, rank, world, "pad") for rank in range(world)]
    parts = [s.indices(3) for s in samplers]
    assert len({len(p) for p in parts}) == 1
    assert len({len(FixedBatches(s, batch, drop_last)) for s in samplers}) == 1
    union = np.concatenate(parts)
    assert set(union) == set(range(n))  # every row seen
    assert len(union) - n == (-n) % world  # and only the padding repeats
    if n % world == 0:
        np.testing.assert_array_equal(np.sort(union), np.arange(n))  # exactly once


@given(n=st.integers(1, 2000), world=st.integers(1, 8), seed=st.integers(0, 1000))
def test_drop_keeps_ranks_disjoint(n, world, seed):
    if n < world:
        return
    parts = [Sampler(n, "global", seed, rank=r, world_size=world, uneven="drop").indices(0) for r in range(world)]
    union = np.concatenate(parts)
    assert len(union) == len(set(union)) == (n // world) * world


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("prop") / "s"
    stoker.write(path, {"label": np.arange(97), "ids": [np.arange(i % 5) for i in range(97)]}, shard_size=256)
    return path


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 20),
    cut=st.integers(0, 100),
    shuffle=st.sampled_from([False, True, "block"]),
    workers=st.sampled_from([(0, 2), (2, 0), (1, 1)]),
    epoch=st.integers(0, 3),
)
def test_resumed_stream_is_the_tail(small_store, batch, cut, shuffle, workers, epoch):
    opts = dict(batch_size=batch, shuffle=shuffle, seed=11, block_size=8, window=2)
    a = stoker.Loader(small_store, num_workers=workers[0], **opts)
    a.set_epoch(epoch)
    stream = [b["label"].numpy() for b in a]
    cut = min(cut, len(stream))
    b = stoker.Loader(small_store, num_workers=workers[0], **opts)
    b.set_epoch(epoch)
    it = iter(b)
    for _ in range(cut):
        next(it)
    state = b.state_dict()
    it.close()
    c = stoker.Loader(small_store, num_workers=workers[1], **opts)
    c.load_state_dict(state)
    tail = [x["label"].numpy() for x in c]
    if cut < len(stream):
        assert len(tail) == len(stream) - cut
        assert all(np.array_equal(x, y) for x, y in zip(tail, stream[cut:]))
    else:  # the epoch was finished: resuming starts the next one
        assert len(tail) == len(stream)
