"""``Store.willneed``: the kernel is asked for exactly the pages of the rows named, in every column kind,
and a shard's tensor column is viewed without importing pyarrow.compute (issue 35: the first batch)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from numpy.lib.array_utils import byte_bounds

import stoker
from stoker.store import advice

PAGE = advice._PAGE


@pytest.fixture
def advised(monkeypatch):
    """Every madvise(WILLNEED) call the store makes, recorded as (first page, end) and made for real."""
    calls: list[tuple[int, int]] = []
    real = advice._MADVISE
    if real is None:
        pytest.skip("no madvise on this platform")

    def record(addr, length, advice_):
        assert advice_ == advice._WILLNEED
        calls.append((addr, addr + length))
        return real(addr, length, advice_)

    monkeypatch.setattr(advice, "_MADVISE", record)
    return calls


def _pages(lo: int, hi: int) -> set[int]:
    return set(range(lo // PAGE, -(-hi // PAGE))) if hi > lo else set()


def _row_pages(store, rows, column) -> set[int]:
    """The pages of ``rows`` of ``column``, from the shards' own numpy views (byte_bounds)."""
    pages: set[int] = set()
    for row in rows:
        s = int(np.searchsorted(store._starts, row, side="right") - 1)
        view, local = store._cache.get(s).columns[column], int(row - store._starts[s])
        if view.offsets is None:
            pages |= _pages(*byte_bounds(view.data[local : local + 1]))
        else:
            lo, hi = view.offsets[local], view.offsets[local + 1]
            pages |= _pages(*byte_bounds(view.offsets[local : local + 2]))
            if hi > lo:
                pages |= _pages(*byte_bounds(view.data[lo:hi]))
    return pages


@pytest.mark.parametrize("column", ["image", "label", "ids", "blob", "text"])
def test_willneed_advises_the_pages_of_the_rows_asked_and_no_others(mixed_store, advised, column):
    store = stoker.open(mixed_store)
    rows = np.array([250, 3, 120, 4, 299, 3])
    store.willneed(rows, [column])
    got = set().union(*(_pages(lo, hi) for lo, hi in advised))
    assert got == _row_pages(store, rows, column)
    assert len(advised) <= len(rows) * 2  # one call per run of pages, never one per page


def test_willneed_merges_neighbouring_rows_into_one_call(tmp_path, advised):
    store = stoker.write(tmp_path / "s", {"x": np.zeros((64, 4096), np.uint8)})
    stoker.open(store).willneed(np.arange(10, 20))
    assert len(advised) == 1 and advised[0][1] - advised[0][0] >= 10 * 4096


def test_willneed_leaves_out_rows_out_of_range_and_reads_the_same_rows_after(mixed_store, mixed_columns, advised):
    store = stoker.open(mixed_store)
    store.willneed(np.array([-1, 300, 5000]))
    assert advised == []
    view = store.select([7, 8])
    view.willneed(np.array([1]), ["label"])  # a view's row 1 is the store's row 8
    assert set().union(*(_pages(lo, hi) for lo, hi in advised)) == _row_pages(view, [8], "label")
    np.testing.assert_array_equal(store.gather(np.array([8, 7]))["image"], mixed_columns["image"][[8, 7]])


def test_a_tensor_column_is_read_without_importing_pyarrow_compute(tmp_path):
    """Old code: FixedSizeListArray.flatten() imported pyarrow.compute at the first shard (0.05-0.1 s)."""
    path = tmp_path / "t"
    rows = np.arange(6 * 2 * 3, dtype=np.float32).reshape(6, 2, 3)
    stoker.write(path, {"x": rows, "y": np.arange(6)}, shard_size=100)
    code = (
        "import sys, numpy as np, stoker; s = stoker.open(sys.argv[1]); x = s.gather(np.array([5, 0, 3]))['x'];"
        "print('pyarrow.compute' in sys.modules, x.ravel().tolist())"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 1)[0] == "False"
    assert out.stdout.split(" ", 1)[1].strip() == str(rows[[5, 0, 3]].ravel().tolist())
