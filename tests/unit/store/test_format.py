"""stoker.store.format: what a manifest must say of each shard's checksum."""

from __future__ import annotations

import json

import pytest

import stoker
from stoker.errors import ManifestError
from stoker.store.format import ShardInfo


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda m, s: s.pop("xxh3_128"), "no checksum"),  # format 2 without a checksum
        (lambda m, s: m.update(version=1), "no checksum"),  # format 1 knows only sha256
    ],
)
def test_shard_without_a_known_checksum_is_refused(mixed_store, mutate, match):
    path = mixed_store / "manifest.json"
    m = json.loads(path.read_text())
    mutate(m, m["shards"][0])
    path.write_text(json.dumps(m))
    with pytest.raises(ManifestError, match=match):
        stoker.open(mixed_store)


def test_unknown_algorithm_is_refused():
    with pytest.raises(ValueError, match="unknown checksum 'md5'"):
        ShardInfo("shard-00000.arrow", 1, 10, "00", "md5")
