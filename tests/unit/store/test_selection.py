import numpy as np
import pytest
import torch

from stoker.errors import ConfigError
from stoker.store.selection import check_indices, split_rows, split_sizes


def test_check_indices_accepts_lists_ranges_arrays_tensors():
    np.testing.assert_array_equal(check_indices([2, 0, 2], 3), [2, 0, 2])
    np.testing.assert_array_equal(check_indices(range(1, 5, 2), 5), [1, 3])
    np.testing.assert_array_equal(check_indices(torch.tensor([4, 1]), 5), [4, 1])
    assert check_indices([], 5).dtype == np.int64


@pytest.mark.parametrize(
    ("indices", "match"),
    [
        ([0, 5, 7], r"indices\[1\] = 5 is out of range.*0\.\.4"),
        ([-1], r"indices\[0\] = -1 is out of range"),
        (np.array([True, False]), "boolean mask"),
        ([0.5], "integer row numbers"),
        ([[0, 1]], "1-D"),
    ],
)
def test_check_indices_refuses(indices, match):
    with pytest.raises(ConfigError, match=match) as info:
        check_indices(indices, 5)
    assert info.value.option == "indices"


def test_split_sizes_counts_and_fractions():
    assert split_sizes(10, [7, 3]) == [7, 3]
    assert split_sizes(10, [0.8, 0.1, 0.1]) == [8, 1, 1]
    assert split_sizes(7, [0.5, 0.5]) == [4, 3]  # the tie goes to the earlier part
    assert split_sizes(10, [1 / 3, 1 / 3, 1 / 3]) == [4, 3, 3]
    assert sum(split_sizes(101, [0.7, 0.2, 0.1])) == 101


@pytest.mark.parametrize(
    ("parts", "match"),
    [
        ([7, 2], "sum to the 10 rows"),
        ([0.5, 0.4], "sum to 1"),
        ([1.5, -0.5], r"in \[0, 1\]"),
        ([0.95, 0.05], "leave part 1 with no row"),
        ([], "non-empty"),
        ("ab", "non-empty"),
        ([True, False], "numbers"),
    ],
)
def test_split_sizes_refuses(parts, match):
    with pytest.raises(ConfigError, match=match):
        split_sizes(10, parts)


def test_split_rows_partition_and_determinism():
    parts = split_rows(100, [0.6, 0.4], seed=3)
    assert [len(p) for p in parts] == [60, 40]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(100))
    assert all(np.all(np.diff(p) > 0) for p in parts)
    again = split_rows(100, [0.6, 0.4], seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = split_rows(100, [0.6, 0.4], seed=4)
    assert not np.array_equal(parts[0], other[0])
    ordered = split_rows(10, [6, 4], shuffle=False)
    np.testing.assert_array_equal(ordered[1], [6, 7, 8, 9])
    with pytest.raises(ConfigError, match="seed"):
        split_rows(10, [6, 4], seed=-1)
