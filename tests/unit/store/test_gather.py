"""Store gathers with the tensor copy cut into row ranges (``gather(..., parts=)``, store/gather.py)."""

import concurrent.futures as cf

import numpy as np
import pytest

import stoker


def ranges_runner(cuts, calls):
    """A parts runner: ranges cut at ``cuts`` (fractions of the rows), copied in reverse order by
    several threads; records (rows, row_bytes, ranges) of each call."""

    def run(rows, row_bytes, copy):
        bounds = sorted({0, rows, *(int(rows * c) for c in cuts)})
        ranges = list(zip(bounds[:-1], bounds[1:]))[::-1]
        calls.append((rows, row_bytes, ranges))
        with cf.ThreadPoolExecutor(3) as pool:
            for fut in [pool.submit(copy, a, b) for a, b in ranges]:
                fut.result()

    return run


def assert_same(a, b):
    assert list(a) == list(b)
    for name in a:
        if isinstance(a[name], np.ndarray):
            assert a[name].dtype == b[name].dtype
            np.testing.assert_array_equal(a[name], b[name])
        elif isinstance(a[name], stoker.Ragged):
            np.testing.assert_array_equal(a[name].values, b[name].values)
            np.testing.assert_array_equal(a[name].offsets, b[name].offsets)
        else:
            assert a[name] == b[name]


CUTS = (0.1, 0.35, 0.5, 0.9)


@pytest.mark.parametrize("order", ["sorted", "shuffled", "repeats", "reversed", "one row", "empty"])
def test_ranges_give_the_same_batch_as_one_copy(mixed_store, mixed_columns, order):
    ds = stoker.open(mixed_store)
    assert ds.num_shards > 3
    rng = np.random.default_rng(3)
    idx = {
        "sorted": np.sort(rng.choice(300, 120, replace=False)),
        "shuffled": rng.permutation(300)[:150],
        "repeats": rng.integers(0, 300, 200),
        "reversed": np.arange(299, -1, -1),
        "one row": np.array([17]),
        "empty": np.array([], dtype=np.int64),
    }[order]
    calls = []
    split = ds.gather(idx, parts=ranges_runner(CUTS, calls))
    assert_same(split, ds.gather(idx))
    np.testing.assert_array_equal(split["image"], mixed_columns["image"][idx])
    np.testing.assert_array_equal(split["label"], idx)
    if len(idx):
        assert calls and calls[0][:2] == (len(idx), 4 * 5 * 3 + 8 + 4)  # image + label + score rows


def test_ranges_straddle_shard_boundaries(mixed_store, mixed_columns):
    ds = stoker.open(mixed_store)
    starts = ds.shard_starts
    idx = np.sort(np.concatenate([np.arange(s - 3, s + 3) for s in starts[1:-1]]))  # around every boundary
    calls = []
    out = {"image": np.full((len(idx), 4, 5, 3), 7, np.uint8), "score": np.zeros(len(idx), np.float32)}
    res = ds.gather(idx, ["image", "score", "ids"], out=out, parts=ranges_runner(CUTS, calls))
    assert res["image"] is out["image"] and res["score"] is out["score"]
    np.testing.assert_array_equal(res["image"], mixed_columns["image"][idx])
    np.testing.assert_array_equal(res["score"], mixed_columns["score"][idx])
    for i, row in enumerate(idx):
        np.testing.assert_array_equal(res["ids"][i], mixed_columns["ids"][row])
    ((_, _, ranges),) = calls
    assert len(ranges) == 5


def test_every_row_range_is_copied_to_its_own_slice(tmp_path):
    """Rows equal to their row number: a range written to another slice, or read from other rows, shows."""
    n = 1000
    rows = np.repeat(np.arange(n, dtype=np.float64)[:, None], 16, axis=1)
    path = stoker.write(tmp_path / "s", {"x": rows}, shard_size=16 * 1024)
    ds = stoker.open(path)
    assert ds.num_shards > 5
    idx = np.sort(np.random.default_rng(0).choice(n, 500, replace=False))
    for cuts in [(0.5,), CUTS, tuple(np.linspace(0, 1, 40)[1:-1])]:
        got = ds.gather(idx, parts=ranges_runner(cuts, []))["x"]
        np.testing.assert_array_equal(got[:, 0], idx)
        np.testing.assert_array_equal(got, rows[idx])


def test_views_and_splits_cut_into_ranges(mixed_store, mixed_columns):
    ds = stoker.open(mixed_store)
    view = ds.select(np.random.default_rng(1).permutation(300)[:180])
    idx = np.arange(0, 180, 2)
    assert_same(view.gather(idx, parts=ranges_runner(CUTS, [])), view.gather(idx))
    np.testing.assert_array_equal(view.gather(idx, parts=ranges_runner(CUTS, []))["label"], view.rows[idx])
    for part in ds.split([0.5, 0.3, 0.2], seed=4):
        rows = np.arange(len(part))[::-1]
        got = part.gather(rows, parts=ranges_runner(CUTS, []))
        np.testing.assert_array_equal(got["image"], mixed_columns["image"][part.rows[rows]])
