import numpy as np
import pytest

from stoker.errors import ConfigError, StateError
from stoker.pipeline.sampler import FixedBatches, Sampler, order_name


def test_sequential_is_identity():
    np.testing.assert_array_equal(Sampler(10).indices(3), np.arange(10))


def test_global_shuffle_is_seeded_and_new_each_epoch():
    s = Sampler(1000, "global", seed=5)
    a, b = s.indices(0), s.indices(1)
    assert sorted(a) == list(range(1000)) and not np.array_equal(a, b)
    np.testing.assert_array_equal(a, Sampler(1000, "global", seed=5).indices(0))
    assert not np.array_equal(a, Sampler(1000, "global", seed=6).indices(0))


def test_block_shuffle_keeps_reads_within_a_window():
    s = Sampler(10_000, "block", seed=1, block_size=100, window=4)
    order = s.indices(0)
    assert sorted(order) == list(range(10_000))
    # every run of 400 rows (one window) touches at most 4 blocks
    for w in range(25):
        blocks = np.unique(order[w * 400 : (w + 1) * 400] // 100)
        assert len(blocks) <= 4
    assert not np.array_equal(order, np.sort(order))


def test_uneven_pad_and_drop():
    pad = [Sampler(10, "global", rank=r, world_size=3, uneven="pad").indices(0) for r in range(3)]
    assert [len(p) for p in pad] == [4, 4, 4]
    assert set(np.concatenate(pad)) == set(range(10))
    drop = [Sampler(10, "global", rank=r, world_size=3, uneven="drop").indices(0) for r in range(3)]
    assert [len(d) for d in drop] == [3, 3, 3]
    assert len(set(np.concatenate(drop))) == 9


def test_batches_and_resume_start():
    fb = FixedBatches(Sampler(10, "global", seed=2), batch_size=4)
    full = list(fb.batches(0))
    assert [len(b) for b in full] == [4, 4, 2] and len(fb) == 3
    tail = list(fb.batches(0, start=1))
    assert all(np.array_equal(a, b) for a, b in zip(full[1:], tail))
    assert len(FixedBatches(Sampler(10), 4, drop_last=True)) == 2


def test_fingerprint_mismatch_names_the_field():
    fb = FixedBatches(Sampler(10, "global", seed=2), 4)
    other = FixedBatches(Sampler(10, "global", seed=3), 4)
    with pytest.raises(StateError, match="seed: saved 3, now 2"):
        fb.check_fingerprint(other.fingerprint())


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_rows=0),
        dict(num_rows=5, order="random"),
        dict(num_rows=5, rank=2, world_size=2),
        dict(num_rows=5, uneven="x"),
        dict(num_rows=5, block_size=0),
        dict(num_rows=1, world_size=2, uneven="drop"),
    ],
)
def test_invalid_sampler(kwargs):
    with pytest.raises(ConfigError):
        Sampler(**kwargs)


def test_order_names():
    assert order_name(True) == "global" and order_name(False) == "sequential" and order_name("block") == "block"
    with pytest.raises(ConfigError, match="shuffle must be"):
        order_name("yes")
