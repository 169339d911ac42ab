"""stoker.cli.bench_loaders: the loader stoker bench times follows what wrote the store."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.cli.bench_loaders import bench_loaders, store_kind
from stoker.errors import ConfigError


def test_a_plain_store_is_timed_with_the_plain_loader(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(20)})
    ds = stoker.open(tmp_path / "s")
    assert store_kind(ds) == "plain"
    plan = bench_loaders(ds, "auto", 8, shuffle=False, columns=("x",), device="cpu", size=None)
    assert plan.mode == "plain" and isinstance(plan.make(0), stoker.Loader)
    assert [b["x"].tolist() for b in plan.make(0)][0] == list(range(8))


def test_metadata_names_the_kind(tmp_path):
    stoker.write(tmp_path / "i", {"x": np.arange(4)}, metadata={"kind": "images", "mode": "encoded"})
    stoker.write(tmp_path / "t", {"x": np.arange(4)}, metadata={"stoker.text": {"name": "bert"}})
    assert store_kind(stoker.open(tmp_path / "i")) == "images"
    assert store_kind(stoker.open(tmp_path / "t")) == "text"


@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        ("sideways", {}, "mode must be one of auto, plain, images, text, not 'sideways'"),
        ("images", {"columns": ("x",)}, "--columns selects the columns of a plain store"),
        ("plain", {"size": 64}, "--size 64 sets the crop of an image store"),
    ],
)
def test_options_that_do_not_apply_are_refused(tmp_path, mode, options, message):
    stoker.write(tmp_path / "s", {"x": np.arange(4)})
    kwargs = {"shuffle": False, "columns": None, "device": "cpu", "size": None, **options}
    with pytest.raises(ConfigError, match=message):
        bench_loaders(stoker.open(tmp_path / "s"), mode, 2, **kwargs)
