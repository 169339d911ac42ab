"""pipeline/padding.py (one padding layout per chunk of batches) against padding each batch on its own."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.pipeline.padding import PadGrid, pad_groups
from stoker.store.columns import Ragged


def _pad_one(rows: list[np.ndarray], pad_value: int, multiple_of: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    longest = max((len(r) for r in rows), default=0)
    width = -(-longest // multiple_of) * multiple_of
    ids = np.full((len(rows), width), pad_value, dtype=dtype)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(st.lists(st.lists(st.integers(0, 255), max_size=9), max_size=6), min_size=1, max_size=7),
    multiple_of=st.integers(1, 8),
    pad_value=st.sampled_from([0, 7, 255, 300, -1]),
    wide=st.booleans(),
)
def test_grid_pads_every_batch_like_padding_it_alone(batches, multiple_of, pad_value, wide):
    rows = [np.array(r, dtype=np.uint8) for b in batches for r in b]  # empty batches and empty rows included
    flat = Ragged.from_rows(rows, dtype=np.uint8)
    sizes = np.array([len(b) for b in batches], dtype=np.int64)
    grid = PadGrid.of(flat.offsets, sizes, multiple_of)
    dtype = np.int64 if wide else None
    ids = grid.fill(flat.values, pad_value, dtype)
    mask = grid.mask(np.int64)
    assert ids.dtype == np.int64 if wide else np.can_cast(np.uint8, ids.dtype)
    start = 0
    for k, b in enumerate(batches):
        want_ids, want_mask = _pad_one([np.array(r, np.int64) for r in b], pad_value, multiple_of, np.int64)
        a, z = int(grid.starts[k]), int(grid.starts[k + 1])
        assert int(grid.widths[k]) == want_ids.shape[1] and grid.bounds[k] == start
        np.testing.assert_array_equal(ids[a:z].reshape(want_ids.shape).astype(np.int64), want_ids)
        np.testing.assert_array_equal(mask[a:z].reshape(want_mask.shape), want_mask)
        start += len(b)
    assert grid.starts[-1] == len(ids) == len(mask)


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(st.lists(st.lists(st.integers(-50, 50), max_size=9), max_size=6), min_size=1, max_size=7),
    multiple_of=st.integers(1, 8),
    pad_value=st.sampled_from([0, -1, 99]),
    dtype=st.sampled_from([np.int8, np.int32, np.float32]),
)
def test_pad_groups_pads_every_group_in_the_rows_dtype(batches, multiple_of, pad_value, dtype):
    rows = [np.array(r, dtype=dtype) for b in batches for r in b]
    flat = Ragged.from_rows(rows, dtype=dtype)
    bounds = np.concatenate([[0], np.cumsum([len(b) for b in batches])]).astype(np.int64)
    got = pad_groups(flat, bounds, pad_value, multiple_of)
    assert len(got) == len(batches)
    for b, padded in zip(batches, got):
        want, _ = _pad_one([np.array(r, np.int64) for r in b], pad_value, multiple_of, np.int64)
        assert padded.dtype == dtype and padded.shape == want.shape
        np.testing.assert_array_equal(padded.astype(np.int64), want)
