import numpy as np
import pytest

from stoker.errors import ConfigError, StateError
from stoker.pipeline.sampler import WINDOW_BATCHES_ROWS, BatchSampler, FixedBatches, Sampler, order_name


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


@pytest.mark.parametrize("order", ["sequential", "global", "block"])
def test_a_run_of_the_order_is_its_positions(order):
    """``EpochOrder.rows`` (one rank's batch: a run of positions) gives what ``take`` gives."""
    epoch_order = Sampler(1000, order, seed=3, block_size=64, window=2).epoch_order(2)
    for begin, end in [(0, 1000), (0, 0), (17, 529), (999, 1000)]:
        rows = epoch_order.rows(begin, end)
        assert rows.dtype == np.int64
        np.testing.assert_array_equal(rows, epoch_order.take(np.arange(begin, end)))


def test_the_next_epochs_order_is_built_ahead_and_is_the_same_order():
    """The last batch of a pass builds the next epoch's global order (hidden behind the reads in
    flight); the next pass gets that object once, equal to the order built fresh."""
    from stoker.pipeline import sampler as module

    s = Sampler(5000, "global", seed=11)
    batches = list(s.batches(0, 100, False))
    ahead = module._AHEAD.get((s, 1))
    assert ahead is not None
    again = Sampler(5000, "global", seed=11)  # an equal sampler (another loader) may take it
    assert again.epoch_order(1) is ahead
    assert (s, 1) not in module._AHEAD  # handed out once
    fresh = Sampler(5000, "global", seed=11).epoch_order(1)
    np.testing.assert_array_equal(ahead.rows(0, 5000), fresh.rows(0, 5000))
    np.testing.assert_array_equal(np.concatenate(batches), s.indices(0))
    np.testing.assert_array_equal(np.concatenate(list(s.batches(1, 100, False))), fresh.rows(0, 5000))


def test_orders_built_ahead_are_bounded(monkeypatch):
    from stoker.pipeline import sampler as module

    monkeypatch.setattr(module, "AHEAD_ROWS", 1000)
    monkeypatch.setattr(module, "_AHEAD", {})
    list(Sampler(1001, "global").batches(0, 500, False))  # above the bound: nothing built ahead
    list(Sampler(10, "sequential").batches(0, 5, False))  # nothing to build
    assert not module._AHEAD
    for seed in range(module.AHEAD_KEPT + 3):
        list(Sampler(100, "global", seed=seed).batches(0, 50, False))
    assert len(module._AHEAD) <= module.AHEAD_KEPT


def test_window_batches_count_one_window_of_block_order_on_one_rank():
    def window(order: str, rows: int = 100_000, world: int = 1, batch: int = 100) -> int:
        sampler = Sampler(rows, order, block_size=1000, window=8, world_size=world)
        return FixedBatches(sampler, batch).window_batches()

    assert window("block") == 80  # 8 blocks of 1000 rows, 100 a batch
    assert window("block", world=3) == 27  # each rank takes a third of the window's rows
    assert window("block", rows=2500) == 25  # a store smaller than one window
    assert window("global") == window("sequential") == 1


def test_window_batches_are_bounded_by_rows():
    sampler = Sampler(10**9, "block", block_size=2**20, window=64)
    assert FixedBatches(sampler, 1).window_batches() == WINDOW_BATCHES_ROWS
    assert BatchSampler.window_batches(FixedBatches(sampler, 1)) == 1  # the base class: independent batches
