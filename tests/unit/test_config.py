import dataclasses

import pytest

from stoker import LoaderConfig
from stoker.errors import ConfigError


def test_defaults_follow_dataloader():
    cfg = LoaderConfig()
    assert (cfg.batch_size, cfg.shuffle, cfg.drop_last, cfg.prefetch_factor, cfg.timeout) == (1, False, False, 2, 0.0)


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LoaderConfig().batch_size = 3


def test_every_field_is_documented():
    doc = LoaderConfig.__doc__
    for f in dataclasses.fields(LoaderConfig):
        assert f"{f.name}:" in doc, f.name


@pytest.mark.parametrize(
    "bad",
    [dict(batch_size=True), dict(batch_size=2.5), dict(window=0), dict(uneven="both"), dict(pad_to_multiple_of=0)],
)
def test_rejects(bad):
    with pytest.raises(ConfigError):
        LoaderConfig(**bad)
