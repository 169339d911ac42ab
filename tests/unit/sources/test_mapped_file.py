"""stoker.sources.mapped_file: a file's map paged in without the GIL, and its page-cache residency."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest


def test_page_in_releases_the_gil(tmp_path):
    """MADV_POPULATE_READ runs without the GIL: another thread keeps running while a cold file is read in.

    Counted, not timed: a call that held the GIL would let this thread take at most a tick or
    two inside it, however long it lasted; one that releases it lets it tick all along."""
    from stoker.sources.mapped_file import MappedFile, drop_from_page_cache, page_cache_share

    path = tmp_path / "cold.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 255, 256 * 2**20, dtype=np.uint8).tobytes())
    drop_from_page_cache(path)
    if page_cache_share(path) > 0.1:
        pytest.skip("this filesystem keeps dropped pages cached (tmpfs?): a cold file cannot be made")
    f = MappedFile(path)
    try:
        span, ticks = [], []

        def page_in():
            span.append(time.perf_counter())
            f.madvise(22, 0, 256 * 2**20)
            span.append(time.perf_counter())

        thread = threading.Thread(target=page_in)
        thread.start()
        while thread.is_alive():
            time.sleep(0.001)
            ticks.append(time.perf_counter())
        thread.join()
    finally:
        f.close()
    start, stop = span
    if stop - start < 0.05:
        pytest.skip(f"the disk read 256 MB in {(stop - start) * 1e3:.0f} ms: too short to tell")
    inside = [t for t in ticks if start < t < stop]
    assert len(inside) >= 5, f"this thread ticked {len(inside)} times during a page-in of {(stop - start) * 1e3:.0f} ms"


def test_sampled_page_cache_share_agrees_with_the_full_count(tmp_path):
    from stoker.sources.mapped_file import MappedFile, drop_from_page_cache

    path = tmp_path / "half.bin"
    path.write_bytes(np.ones(96 * 2**20, np.uint8).tobytes())
    drop_from_page_cache(path)
    with open(path, "rb") as f:
        f.read(32 * 2**20)  # the first third cached again (and readahead a little past it)
    mapped = MappedFile(path)
    try:
        full = mapped.resident(0, 96 * 2**20)
        sampled = mapped.resident(0, 96 * 2**20, sample=True)
        tail = mapped.resident(64 * 2**20, 32 * 2**20, sample=True)
    finally:
        mapped.close()
    if full > 0.9:
        pytest.skip("this filesystem keeps dropped pages cached (tmpfs?)")
    assert 0.3 <= full <= 0.45 and abs(sampled - full) < 0.1 and tail < 0.05
