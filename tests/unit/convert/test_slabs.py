"""convert/slabs.py: rows cut into even, shard-sized slabs."""

from __future__ import annotations

import numpy as np

from stoker.convert.slabs import even_slabs


def test_slabs_are_even_cover_every_row_and_keep_whole_chunks():
    rng = np.random.default_rng(4)
    for _ in range(500):
        rows, step, align = int(rng.integers(1, 5000)), int(rng.integers(1, 700)), int(rng.choice([1, 7, 64]))
        multiple = int(rng.integers(1, 5))
        slabs = even_slabs(rows, step, align, multiple)
        assert slabs[0][0] == 0 and slabs[-1][1] == rows
        assert all(a[1] == b[0] for a, b in zip(slabs, slabs[1:]))
        sizes = [stop - start for start, stop in slabs]
        assert min(sizes) > 0 and max(sizes) <= max(step, 1)
        unit = align if 1 < align < step else 1
        assert all(start % unit == 0 for start, _ in slabs)
        assert max(sizes) - min(sizes) <= unit  # no short last slab
        units = -(-rows // unit)
        fewest = -(-units // max(step // unit, 1))  # as few as the step allows ...
        rounded = -(-fewest // multiple) * multiple if fewest > 1 else 1
        assert len(slabs) == min(rounded, max(units, fewest))  # ... rounded up to the multiple when over one
    assert even_slabs(100, 30) == [(0, 25), (25, 50), (50, 75), (75, 100)]  # not 30, 30, 30, 10
    assert len(even_slabs(100, 30, multiple=3)) == 6  # two rounds for three writers
    assert len(even_slabs(5, 1, multiple=4)) == 5  # no more slabs than rows
    assert even_slabs(6, 10**6, multiple=2) == [(0, 6)]  # rows that fit one slab stay one (issue 16 item 24)
