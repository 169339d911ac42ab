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


@given(
    n=st.integers(1, 1500),
    before=st.integers(1, 6),
    after=st.integers(1, 6),
    order=orders,
    batch=st.integers(1, 40),
    drop_last=st.booleans(),
    uneven=st.sampled_from(["pad", "drop"]),
    cut=st.floats(0, 1),
    data=st.data(),
)
def test_elastic_resume_sees_every_row_once(n, before, after, order, batch, drop_last, uneven, cut, data):
    """A position saved on ``before`` ranks, resumed on ``after``: no row twice before the end of the
    epoch, and only rows of the epoch's end left out or repeated (as uneven/drop_last say)."""
    if uneven == "drop" and n < max(before, after):
        return
    seed = data.draw(st.integers(0, 1000))
    first = [FixedBatches(Sampler(n, order, seed, 16, 3, r, before, uneven), batch, drop_last) for r in range(before)]
    k = int(cut * len(first[0]))
    head = [b for s in first for b in list(s.batches(2))[:k]]
    assert all(len(b) <= batch for b in head)
    position = first[0].position(0, k, before)
    assert all(s.position(0, k, before) == position for s in first)  # the same on every rank
    second = [FixedBatches(Sampler(n, order, seed, 16, 3, r, after, uneven), batch, drop_last) for r in range(after)]
    tail = [list(s.batches_from(2, position)) for s in second]
    assert len({len(t) for t in tail}) == 1 and len(tail[0]) == second[0].batches_left(position)
    seen = np.concatenate([*head, *(b for t in tail for b in t), np.zeros(0, dtype=np.int64)])
    epoch = Sampler(n, order, seed, 16, 3).global_order(2)
    where = np.empty(n, dtype=np.int64)
    where[epoch] = np.arange(n)  # each row's position in the epoch's order
    counts = np.bincount(seen, minlength=n)
    ends = (after + before) * (batch + 1)  # rows this close to the end may be dropped, or repeated after it
    assert (where[counts == 0] >= n - ends).all()  # left out: only the end of the epoch
    assert (where[counts > 1] < max(before, after)).all()  # repeated: only padding, from the start of the order
    if uneven == "pad" and not drop_last:
        assert (counts > 0).all()
    if uneven == "drop":
        assert (counts <= 1).all()


@given(n=st.integers(1, 1000), world=st.integers(1, 6), order=orders, seed=st.integers(0, 100))
def test_the_ranks_interleave_into_the_global_order(n, world, order, seed):
    """The epoch's order does not depend on the world size: rank r holds positions r, r+W, ..."""
    if n < world:
        return
    parts = [Sampler(n, order, seed, 16, 3, r, world, "drop").indices(1) for r in range(world)]
    woven = np.stack([p[: min(map(len, parts))] for p in parts], axis=1).reshape(-1)
    np.testing.assert_array_equal(woven, Sampler(n, order, seed, 16, 3).global_order(1)[: len(woven)])
