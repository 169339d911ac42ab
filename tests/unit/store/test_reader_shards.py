"""Stores of many shards: shards mapped on first touch, an LRU cap on the maps, gathers that
touch only the shards a batch needs (issue 15 item 14). No timings: the figures are in
``benchmarks/bench_shards.py``."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import stoker


def _maps_of(store) -> set[str]:
    """The files of ``store`` that this process has memory-mapped now (from /proc/self/maps)."""
    root = str(store.resolve())
    with open("/proc/self/maps") as maps:
        return {line.split(maxsplit=5)[5].strip() for line in maps if root in line}


def _write_many(path, columns, shard_size: int):
    """``columns`` written in shards of about ``shard_size`` bytes (1: one row per shard)."""
    return stoker.write(path, columns, shard_size=shard_size)


@pytest.fixture
def many(tmp_path, mixed_columns):
    return _write_many(tmp_path / "many", mixed_columns, 1)  # 300 shards of one row


def test_a_fresh_store_maps_no_shard_until_read(many):
    ds = stoker.open(many)
    assert ds.num_shards == 300
    assert _maps_of(many) == set()
    assert ds.mapped_shards == 0
    ds.gather(np.array([0, 0]))  # a row of the first shard only
    mapped = _maps_of(many)
    assert mapped == {str((many / "shard-00000.arrow").resolve())}
    assert ds.mapped_shards == 1


def test_the_lru_cap_bounds_the_maps_and_every_row_reads_right(many, mixed_columns, monkeypatch):
    monkeypatch.setenv("STOKER_MAX_MAPPED_SHARDS", "4")
    ds = stoker.open(many)
    n = len(ds)
    most = 0
    for start in range(0, n, 7):  # walk the store in order, 7 rows at a time: every shard is touched
        idx = np.arange(start, min(start + 7, n))
        got = ds.gather(idx)
        np.testing.assert_array_equal(got["image"], mixed_columns["image"][idx])
        assert got["text"] == [mixed_columns["text"][i] for i in idx]
        gc.collect()
        most = max(most, len(_maps_of(many)), ds.mapped_shards)
    assert most <= 4
    # random rows over all 300 shards, with a cap of 4: still right
    idx = np.random.default_rng(3).integers(0, n, 200)
    got = ds.gather(idx)
    np.testing.assert_array_equal(got["label"], mixed_columns["label"][idx])
    for row, i in enumerate(idx):
        np.testing.assert_array_equal(got["ids"][row], mixed_columns["ids"][i])
    assert got["blob"] == [mixed_columns["blob"][i] for i in idx]
    gc.collect()
    assert ds.mapped_shards <= 4 and len(_maps_of(many)) <= 4


def test_a_cap_that_is_not_a_positive_integer_is_refused(many, monkeypatch):
    monkeypatch.setenv("STOKER_MAX_MAPPED_SHARDS", "0")
    with pytest.raises(stoker.StokerError, match="STOKER_MAX_MAPPED_SHARDS='0' must be an integer >= 1"):
        stoker.open(many)


@pytest.mark.parametrize("shard_size,shards", [(2**30, 1), (4096, None), (1, 300)])
def test_gathers_are_equal_whatever_the_shard_count(tmp_path, mixed_columns, shard_size, shards):
    ds = stoker.open(_write_many(tmp_path / f"s{shard_size}", mixed_columns, shard_size))
    assert ds.num_shards == shards if shards else 1 < ds.num_shards < 300
    rng = np.random.default_rng(11)
    for idx in (rng.integers(0, 300, 97), np.sort(rng.integers(0, 300, 97)), np.arange(300), np.array([], int)):
        got = ds.gather(idx)
        for name in ("image", "label", "score"):
            np.testing.assert_array_equal(got[name], mixed_columns[name][idx])
        assert len(got["ids"]) == len(idx)
        for row, i in enumerate(idx):
            np.testing.assert_array_equal(got["ids"][row], mixed_columns["ids"][i])
        assert got["blob"] == [mixed_columns["blob"][i] for i in idx]
        assert got["text"] == [mixed_columns["text"][i] for i in idx]


@pytest.mark.parametrize(
    "max_map_count,env,cap",
    [
        (65530, None, 32765),  # the kernel's default: half of it
        (65530, "", 32765),  # an empty variable is unset
        (262144, None, 131072),  # a raised limit raises the cap
        (1000, None, 1024),  # never below 1,024
        (2048, None, 1024),
        (2050, None, 1025),
        (None, None, 8192),  # no /proc: the fixed default
        (65530, "4", 4),  # the variable wins
        (None, "100000", 100000),
    ],
)
def test_the_default_cap_is_half_of_max_map_count(max_map_count, env, cap):
    assert stoker.store.shards.mapped_shards_cap(max_map_count, env) == cap


@pytest.mark.parametrize("env", ["0", "-3", "many"])
def test_the_cap_function_refuses_a_variable_that_is_not_a_positive_integer(env):
    with pytest.raises(stoker.StokerError, match="must be an integer >= 1"):
        stoker.store.shards.mapped_shards_cap(65530, env)


def test_a_store_opened_here_takes_its_cap_from_this_kernel(many, monkeypatch):
    monkeypatch.delenv("STOKER_MAX_MAPPED_SHARDS", raising=False)
    with open("/proc/sys/vm/max_map_count") as f:
        max_map_count = int(f.read())
    ds = stoker.open(many)
    assert ds.max_mapped_shards == max(max_map_count // 2, 1024)
    assert ds.max_mapped_shards == stoker.store.shards.mapped_shards_cap(max_map_count, None)
    monkeypatch.setenv("STOKER_MAX_MAPPED_SHARDS", "7")  # read when a store is opened, not before
    assert ds.max_mapped_shards == max(max_map_count // 2, 1024)
    assert stoker.open(many).max_mapped_shards == 7
