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


def test_torch_dataloader_keywords_are_refused_with_what_does_their_job():
    """A DataLoader habit (sampler=, generator=, worker_init_fn=, ...) got the bare list of options;
    now the refusal says which stoker option does that keyword's job."""
    import pytest

    from stoker.config import LoaderConfig
    from stoker.errors import ConfigError

    with pytest.raises(ConfigError, match=r"sampler: .*rank=/world_size=.*batch_sampler=") as got:
        LoaderConfig.from_options(batch_size=8, sampler=object())
    assert got.value.option == "sampler"
    with pytest.raises(ConfigError, match=r"generator: the order comes from seed="):
        LoaderConfig.from_options(generator=object(), worker_init_fn=print)
    with pytest.raises(ConfigError, match=r"unknown loader option\(s\) \['bogus'\]; the options are"):
        LoaderConfig.from_options(bogus=1)
