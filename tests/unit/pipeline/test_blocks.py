"""The block order's sizes (pipeline/blocks.py): the memory limit read from cgroup files, the window
fitted to a quarter of it, a remote store's blocks made of whole shards, the user's sizes kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError, StateError
from stoker.pipeline.blocks import (
    BLOCK_SIZE,
    LIMIT_ENV,
    READ_AROUND,
    WINDOW,
    fit_cache,
    fit_memory,
    memory_limit,
    read_around,
    window_rows,
)

MiB = 2**20


def cgroups(tmp_path: Path, line: str, files: dict[str, str]) -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "cgroup"
    proc.write_text(line + "\n")
    root = tmp_path / "sys"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return proc, root


def test_the_lowest_cgroup_v2_limit_of_the_group_and_its_parents_binds(tmp_path, monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    proc, root = cgroups(tmp_path, "0::/job/step", {"job/memory.max": str(256 * MiB), "job/step/memory.max": "max"})
    assert memory_limit(proc, root) == (256 * MiB, f"the cgroup memory limit ({root / 'job' / 'memory.max'})")


def test_a_cgroup_v1_limit_and_v1_s_unlimited_value(tmp_path, monkeypatch):
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    unlimited = "9223372036854771712"
    files = {"memory/memory.limit_in_bytes": str(512 * MiB), "memory/a/memory.limit_in_bytes": unlimited}
    proc, root = cgroups(tmp_path, "4:memory:/a", files)
    assert memory_limit(proc, root)[0] == 512 * MiB
    proc, root = cgroups(tmp_path / "none", "4:memory:/a", {"memory/a/memory.limit_in_bytes": unlimited})
    assert memory_limit(proc, root)[1] == "physical RAM"  # no limit: the machine's RAM


def test_the_environment_overrides_and_a_bad_value_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "64MB")
    assert memory_limit(tmp_path / "absent", tmp_path)[0] == 64 * MiB
    monkeypatch.setenv(LIMIT_ENV, "lots")
    with pytest.raises(ConfigError, match=LIMIT_ENV) as info:
        memory_limit()
    assert info.value.option == LIMIT_ENV


@pytest.mark.parametrize("row_bytes", [12 * 1024, 150_000, 600])
@pytest.mark.parametrize("memory", [256 * MiB, 1000 * MiB, 3 * MiB])
def test_the_window_fits_a_quarter_of_the_memory(row_bytes, memory):
    rows = window_rows(row_bytes, memory)
    chosen = fit_memory(rows, row_bytes, "m", 10**9)
    bytes_ = chosen.block_size * chosen.window * row_bytes
    assert bytes_ <= max(memory / 4, row_bytes * chosen.block_size)  # a single block may be all that fits
    assert 1 <= chosen.window <= WINDOW and 1 <= chosen.block_size <= BLOCK_SIZE
    if memory / 4 >= BLOCK_SIZE * WINDOW * row_bytes:
        assert (chosen.block_size, chosen.window) == (BLOCK_SIZE, WINDOW)


def test_twelve_kb_rows_under_256_mib_shrink_the_768_mib_default_window():
    # the case: 4096 x 16 rows of 12 KB is 768 MiB; the sized window is 48 MiB of 16 blocks of 3 MiB
    chosen = fit_memory(window_rows(12 * 1024, 256 * MiB), 12 * 1024, "256 MiB", 10**6)
    assert (chosen.block_size, chosen.window) == (256, 16)
    assert "48 MiB" in chosen.why


def test_blocks_keep_twice_the_disk_s_read_around():
    # 8 MiB read-around (this VM's disk): 16 MiB blocks of 2048 rows, one a window, fit 32 MiB
    chosen = fit_memory(window_rows(12 * 1024, 128 * MiB), 12 * 1024, "128 MiB", 10**6, around=8 * MiB)
    assert (chosen.block_size, chosen.window) == (2048, 1)
    assert read_around(Path("/proc")) == READ_AROUND  # no block device: the kernel's usual 128 KiB


def test_a_store_that_fits_whole_keeps_the_defaults():
    assert fit_memory(window_rows(1000, 64 * MiB), 1000, "m", 5000).block_size == BLOCK_SIZE


def test_a_loader_sizes_unset_block_sizes_and_keeps_given_ones(tmp_path, monkeypatch):
    data = {"i": np.arange(20_000), "x": np.zeros((20_000, 254), dtype=np.float32)}  # 1 KiB rows
    store = stoker.write(tmp_path / "s", data)
    monkeypatch.setenv(LIMIT_ENV, "8MiB")
    loader = stoker.Loader(store, batch_size=100, shuffle="block")
    sampler = loader.batch_sampler.sampler
    assert (sampler.block_size, sampler.window) == loader.block_order.sizes
    assert sampler.block_size * sampler.window * 1024 <= 2 * MiB
    assert f"{LIMIT_ENV}=8MiB" in str(loader.block_order)
    assert sorted(i for b in loader for i in b["i"].tolist()) == list(range(20_000))
    given = stoker.Loader(store, batch_size=100, shuffle="block", block_size=64, window=3)
    assert given.block_order.sizes == (64, 3) and given.block_order.why == "set by the user"
    one = stoker.Loader(store, batch_size=100, shuffle="block", block_size=512)
    assert one.block_order.sizes == (512, 3)  # the window shrunk around the given block (2047 rows fit)
    monkeypatch.delenv(LIMIT_ENV)  # the whole 20 MB store fits a quarter of any machine that runs the tests
    assert stoker.Loader(store, batch_size=100, shuffle="block").block_order.sizes == (BLOCK_SIZE, WINDOW)


def test_a_remote_sized_order_reads_whole_shards_and_fits_half_the_cache(tmp_path):
    store = stoker.open(stoker.write(tmp_path / "s", {"x": np.zeros((4000, 32), dtype=np.int64)}, shard_size="32KB"))
    shards = store.manifest.shards
    per_shard = shards[0].rows
    chosen = fit_cache(store, store.nbytes // 10, 10**9)
    assert chosen.block_size == per_shard
    assert chosen.window * max(s.bytes for s in shards) <= store.nbytes // 20
    tiny = fit_cache(store, shards[0].bytes, 10**9)  # a cache of one shard
    assert tiny.window == 1 and "too large for this cache" in tiny.why


def test_a_state_saved_under_other_sizes_says_which_sizes_resume_it(tmp_path, monkeypatch):
    store = stoker.write(tmp_path / "s", {"i": np.arange(20_000), "x": np.zeros((20_000, 127), np.int64)})
    monkeypatch.setenv(LIMIT_ENV, "4MiB")
    small = stoker.Loader(store, batch_size=100, shuffle="block")
    it = iter(small)
    head = [next(it)["i"].tolist() for _ in range(3)]
    state = small.state_dict()
    it.close()
    monkeypatch.delenv(LIMIT_ENV)
    block, window = small.block_order.sizes
    with pytest.raises(StateError, match=f"pass block_size={block}, window={window} to resume"):
        stoker.Loader(store, batch_size=100, shuffle="block").load_state_dict(state)
    again = stoker.Loader(store, batch_size=100, shuffle="block", block_size=block, window=window)
    again.load_state_dict(state)
    rest = [b["i"].tolist() for b in again]
    assert sorted(sum(head + rest, [])) == list(range(20_000))
