"""Shared-memory segment names: a pool's files removed by prefix, without growing any cache."""

import fnmatch
import os

import pytest

from stoker.pipeline import segments


@pytest.mark.skipif(not os.path.isdir(segments.SHM), reason="no /dev/shm on this system")
def test_unlink_all_removes_the_pools_files_only_and_caches_no_pattern_per_pool():
    # A pool is made per epoch where workers start each epoch; a glob pattern per pool stayed in
    # fnmatch's cache of compiled patterns (up to 32,768): ~1.2 KB more memory per epoch, for days.
    token = f"{os.getpid()}_testpool"
    mine = [os.path.join(segments.SHM, f"stoker_{token}_{i}") for i in range(3)]
    other = os.path.join(segments.SHM, f"stoker_{token}x_0")  # another pool whose name starts alike
    for path in (*mine, other):
        open(path, "wb").close()
    try:
        before = fnmatch._compile_pattern.cache_info().currsize
        segments.unlink_all(token)
        for k in range(50):
            segments.unlink_all(f"{os.getpid()}_gone{k}")
        assert fnmatch._compile_pattern.cache_info().currsize == before
        assert not any(os.path.exists(p) for p in mine)
        assert os.path.exists(other)
    finally:
        for path in (*mine, other):
            if os.path.exists(path):
                os.unlink(path)
