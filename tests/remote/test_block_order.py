"""A remote store larger than its cache, read in block order with the sizes left to stoker
(pipeline/blocks.py): a block is one shard and a window's shards fit half the cache, so one epoch
fetches each shard about once (was: 4096-row blocks over many shards refetched every shard)."""

from __future__ import annotations

import numpy as np

import stoker

ROWS, WIDTH = 4000, 128  # 1 KiB rows


def test_an_epoch_fetches_at_most_twice_the_store_with_a_cache_of_a_tenth(s3, tmp_path):
    url = f"s3://{s3.bucket()}/blocks"
    stoker.write(url, {"i": np.arange(ROWS), "x": np.zeros((ROWS, WIDTH - 1), np.int64)}, shard_size="64KB")
    probe = stoker.open(url, cache_dir=tmp_path / "probe")
    size = probe.nbytes
    ds = stoker.open(url, cache_dir=tmp_path / "cache", cache_limit=size // 10)
    loader = stoker.Loader(ds, batch_size=50, shuffle="block", seed=4, num_workers=2)
    assert loader.block_order.block_size == ds.manifest.shards[0].rows and "cache_limit" in loader.block_order.why
    seen = sorted(i for batch in loader for i in batch["i"].tolist())
    assert seen == list(range(ROWS))
    fetched = ds.remote_stats()["bytes_fetched"]
    assert fetched <= 2 * size, f"one epoch fetched {fetched / size:.1f}x the store"
