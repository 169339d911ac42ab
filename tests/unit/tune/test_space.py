"""The searched settings and their constraints (tune/space.py)."""

from __future__ import annotations

import pytest

from stoker.errors import ConfigError
from stoker.tune.space import Space, custom_space, default_space, normalize, worker_counts


def test_worker_counts_span_zero_the_cores_and_twice_the_cores():
    assert worker_counts(2) == (0, 1, 2, 4)
    assert worker_counts(3) == (0, 1, 2, 3, 4)
    assert worker_counts(16)[-1] == 32


def test_default_space_searches_workers_engine_prefetch_and_skips_pin_memory_on_cpu():
    space = default_space("plain", "cpu", cores=2)
    assert list(space.values) == ["num_workers", "engine", "prefetch_factor"]
    assert any("pin_memory" in note and "CUDA" in note for note in space.notes)


def test_pin_memory_is_searched_for_cuda():
    assert "pin_memory" in default_space("plain", "cuda", cores=2).values


def test_pin_memory_asked_on_cpu_is_left_out_and_said():
    space = default_space("plain", "cpu", cores=2, only=["workers", "pin"])
    assert list(space.values) == ["num_workers"]
    assert any("pin_memory is skipped" in note for note in space.notes)


def test_text_settings_only_when_named_and_only_for_text():
    assert "bucket_window" not in default_space("text", cores=2).values
    named = default_space("text", cores=2, only=["bucket_window", "prefetch"])
    assert list(named.values) == ["bucket_window", "prefetch_factor"]
    with pytest.raises(ConfigError, match="text loaders also take") as err:
        default_space("plain", cores=2, only=["bucket_window"])
    assert err.value.option == "bucket_window"


def test_unknown_setting_is_named():
    with pytest.raises(ConfigError, match="'foo'") as err:
        default_space("plain", cores=2, only=["workers", "foo"])
    assert err.value.option == "foo"
    with pytest.raises(ConfigError, match="'colour'") as err:
        custom_space("images", {"num_workers": [1], "colour": [1]}, cores=2)
    assert err.value.option == "colour"


def test_bad_candidate_values_are_refused():
    with pytest.raises(ConfigError, match="engine") as err:
        custom_space("plain", {"engine": ["fibers"]}, cores=2)
    assert err.value.option == "engine"
    with pytest.raises(ConfigError, match="prefetch_factor"):
        custom_space("plain", {"prefetch_factor": [0]}, cores=2)
    with pytest.raises(ConfigError, match="no candidate"):
        custom_space("plain", {"num_workers": []}, cores=2)


def test_space_empty_after_constraints_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="empty after its constraints") as err:
        custom_space("plain", {"num_workers": [0], "engine": ["processes"]}, cores=2)
    assert err.value.option == "num_workers" and "engine=['processes']" in str(err.value)


def test_grid_drops_settings_that_do_not_apply_without_workers():
    space = Space({"num_workers": (0, 1, 2), "engine": ("threads", "processes"), "prefetch_factor": (1, 2, 4)})
    grid = space.settings()
    assert len(grid) == 1 + 2 * 2 * 3
    assert [s for s in grid if s["num_workers"] == 0] == [{"num_workers": 0, "engine": "threads", "prefetch_factor": 2}]
    assert normalize({"num_workers": 0, "engine": "processes"}) is None


def test_image_decode_settings_only_when_named_and_the_gpu_path_only_on_cuda():
    assert "reduced_decode" not in default_space("images", cores=2).values
    assert any("reduced_decode and decode_device are not searched" in n for n in default_space("images", cores=2).notes)
    named = default_space("images", cores=2, only=["reduced_decode", "decode_device", "workers"])
    assert list(named.values) == ["reduced_decode", "num_workers"]
    assert any("decode_device is skipped" in n for n in named.notes)
    assert default_space("images", "cuda", cores=2, only=["decode_device"]).values == {"decode_device": ("cpu", "cuda")}
    with pytest.raises(ConfigError, match="image loaders also take") as err:
        default_space("plain", cores=2, only=["reduced_decode"])
    assert err.value.option == "reduced_decode"


def test_chunk_size_is_searched_when_named_and_its_values_checked():
    space = default_space("plain", cores=2)
    assert "chunk_size" not in space.values
    assert any("chunk_size is not searched" in n for n in space.notes)
    assert default_space("text", cores=2, only=["chunk_size"]).values == {"chunk_size": (None, 1, 4, 16)}
    assert custom_space("plain", {"chunk_size": [None, 2]}, cores=2).values == {"chunk_size": (None, 2)}
    for bad in (0, "4", True):
        with pytest.raises(ConfigError, match="chunk_size") as err:
            custom_space("plain", {"chunk_size": [bad]}, cores=2)
        assert err.value.option == "chunk_size"


def test_tune_searches_chunk_size_and_its_call_sets_it(plain_store):
    import stoker
    from stoker.tune import tune

    result = tune(plain_store, space=["chunk_size"], batch_size=16, trial_batches=2, trial_seconds=0.0, step_ms=1)
    assert {t.setting["chunk_size"] for t in result.trials} == {None, 1, 4, 16}
    assert f"chunk_size={result.best.setting['chunk_size']!r}" in result.call
    loader = eval(result.call, {"stoker": stoker})
    assert loader.config.chunk_size == result.best.setting["chunk_size"]
    loader.close()
