"""A new URL scheme is one ``register_fetcher`` call: here ``dirstore://``, served from a local directory.

Nothing else learns of the scheme: ``stoker.write`` uploads through the fetcher, ``stoker.open`` and
``stoker.Loader`` read through it and the shard cache, as they do for ``s3://``.
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stoker
from stoker.remote import Fetcher, register_fetcher, registry


class DirFetcher(Fetcher):
    """The objects of ``dirstore://NAME/...`` as files under ``root/NAME/...``."""

    name = "dir"

    def __init__(self, root: Path) -> None:
        self.root = root

    def read(self, name: str) -> bytes:
        return (self.root / name).read_bytes()

    def download(
        self, name: str, local: Path, size: int | None = None, seen: Callable[[memoryview], None] | None = None
    ) -> None:
        shutil.copyfile(self.root / name, local)
        if seen is not None:
            seen(memoryview(local.read_bytes()))

    def upload(self, local: Path, name: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, self.root / name)

    def size(self, name: str) -> int:
        return (self.root / name).stat().st_size

    def delete(self, name: str) -> None:
        (self.root / name).unlink()


@pytest.fixture
def dirstore(tmp_path, monkeypatch):
    """``dirstore://`` registered for this test only, its objects under ``tmp_path/objects``."""
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    objects = tmp_path / "objects"

    def factory(url: str, options: Mapping[str, Any]) -> DirFetcher:
        return DirFetcher(objects / url.split("://", 1)[1])

    register_fetcher("dirstore", factory)
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    return objects


def test_a_registered_scheme_is_written_opened_and_loaded(dirstore, tmp_path):
    n = 600
    stoker.write("dirstore://bucket/st", {"x": np.arange(n), "v": np.ones((n, 4), np.float32)}, shard_size="4KB")
    assert (dirstore / "bucket" / "st" / "manifest.json").is_file()  # uploaded through the fetcher
    ds = stoker.open("dirstore://bucket/st")
    assert ds.num_shards > 1 and ds[:]["x"].tolist() == list(range(n))
    assert ds.remote_stats()["client"] == "dir" and ds.remote_stats()["fetched_by"] == {"dir": ds.num_shards}
    assert pickle.loads(pickle.dumps(ds.select([5, 7])))[:]["x"].tolist() == [5, 7]  # reopened by its URL
    seen = np.concatenate([b["x"].numpy() for b in stoker.Loader("dirstore://bucket/st", batch_size=64, shuffle=True)])
    assert sorted(seen.tolist()) == list(range(n))


def test_a_scheme_is_one_of_letters_digits_and_signs(dirstore):
    with pytest.raises(stoker.ConfigError, match="scheme"):
        register_fetcher("my scheme", lambda url, options: DirFetcher(dirstore))
