"""``Plan`` (store/gather.py): where each requested row lives, on its sorted and general paths."""

import numpy as np
import pytest

from stoker.store.gather import Plan

# five shards of 4, 0 (an empty shard), 3, 5 and 1 rows
STARTS = np.array([0, 4, 4, 7, 12, 13], dtype=np.int64)


def expected(idx):
    shard = np.searchsorted(STARTS, idx, side="right") - 1
    return shard, idx - STARTS[shard]


def covered(plan, n):
    """Each output position once, from the run of the shard that holds it."""
    seen = np.zeros(n, dtype=int)
    for s, pos in plan.runs:
        seen[pos] += 1
        assert (plan.shard[pos] == s).all()
    return seen


@pytest.mark.parametrize(
    "idx",
    [
        [],
        [5],
        [0, 3, 4, 6, 7, 11, 12],  # every shard's first and last row
        [4, 4, 4, 5],  # repeats
        [0, 1, 2, 3],  # one shard
        [12],  # the last shard alone
    ],
)
def test_sorted_rows_give_one_run_per_touched_shard(idx):
    idx = np.array(idx, dtype=np.int64)
    plan = Plan(idx, STARTS)
    shard, local = expected(idx)
    assert plan.sorted and plan.n == len(idx)
    np.testing.assert_array_equal(plan.shard, shard)
    np.testing.assert_array_equal(plan.local, local)
    assert [s for s, _ in plan.runs] == sorted(set(shard.tolist()))
    assert all(isinstance(pos, slice) for _, pos in plan.runs)
    assert (covered(plan, len(idx)) == 1).all()


def test_unsorted_rows_take_the_general_path():
    idx = np.array([7, 0, 12, 4, 4, 3], dtype=np.int64)
    plan = Plan(idx, STARTS)
    shard, local = expected(idx)
    assert not plan.sorted
    np.testing.assert_array_equal(plan.shard, shard)
    np.testing.assert_array_equal(plan.local, local)
    assert (covered(plan, len(idx)) == 1).all()


def test_random_rows_match_the_row_by_row_answer():
    rng = np.random.default_rng(0)
    for _ in range(200):
        idx = rng.integers(0, 13, rng.integers(0, 20))
        for rows in (idx, np.sort(idx)):
            plan = Plan(rows, STARTS)
            shard, local = expected(rows)
            np.testing.assert_array_equal(plan.shard, shard)
            np.testing.assert_array_equal(plan.local, local)
            assert (covered(plan, len(rows)) == 1).all()


def test_rows_of_a_one_shard_store_are_one_run_in_any_order():
    idx = np.array([3, 0, 2, 3, 1], dtype=np.int64)
    plan = Plan(idx, np.array([0, 4], dtype=np.int64))
    assert plan.sorted and plan.runs == [(0, slice(0, 5))]
    np.testing.assert_array_equal(plan.local, idx)
    np.testing.assert_array_equal(plan.shard, np.zeros(5))
