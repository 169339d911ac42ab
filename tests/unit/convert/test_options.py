"""convert/options.py: the shared conversion options, validated when built, and the result type."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.errors import ConfigError
from stoker.store.writer import DEFAULT_SHARD_SIZE


def test_defaults_and_shard_size_kept_as_bytes():
    opts = ConvertOptions()
    assert (opts.overwrite, opts.shard_size, opts.progress, opts.workers, opts.metadata) == (
        False,
        DEFAULT_SHARD_SIZE,
        None,
        None,
        None,
    )
    assert ConvertOptions(shard_size="2KB").shard_size == 2048
    assert ConvertOptions(shard_size=1000).shard_size == 1000


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("workers", -1),
        ("workers", 1.5),
        ("workers", True),
        ("workers", "2"),
        ("shard_size", 0),
        ("shard_size", "big"),
        ("shard_size", True),
        ("progress", "yes"),
        ("progress", 3),
        ("overwrite", "yes"),
        ("overwrite", 1),
        ("metadata", {"when": object()}),
        ("metadata", {1: "one"}),
        ("metadata", ["not", "a", "mapping"]),
    ],
)
def test_a_bad_option_is_a_config_error_naming_it(field, value):
    with pytest.raises(ConfigError) as info:
        ConvertOptions(**{field: value})
    assert info.value.option == field
    assert field in str(info.value)


def test_good_values_pass():
    seen = []
    opts = ConvertOptions(overwrite=True, shard_size="1MB", progress=seen.append, workers=0, metadata={"a": [1, 2]})
    assert opts.workers == 0 and opts.metadata == {"a": [1, 2]}
    assert ConvertOptions(progress=True).progress is True and ConvertOptions(progress=False).progress is False


def test_user_metadata_is_copied_and_overrides_what_the_conversion_records():
    given = {"split": "train", "source": "mine"}
    opts = ConvertOptions(metadata=given)
    given["split"] = "changed later"
    merged = opts.with_metadata({"source": {"kind": "hdf5"}, "rows": 3})
    assert merged == {"source": "mine", "rows": 3, "split": "train"}
    assert ConvertOptions().with_metadata({"a": 1}) == {"a": 1}


def test_a_callable_progress_is_told_each_increment():
    seen = []
    with ConvertOptions(progress=seen.append).bar(10, "rows") as bar:
        bar.update(3)
        bar.update(0)
        bar.set_postfix(skipped=1)
        bar.update(7)
    assert seen == [3, 7]


def test_progress_false_shows_no_bar(capsys):
    with ConvertOptions(progress=False).bar(10, "rows") as bar:
        bar.update(10)
    assert capsys.readouterr().err == ""


def test_result_is_a_path_like_and_says_what_it_wrote(tmp_path):
    result = ConvertResult(tmp_path / "s", 1234, 2, {"skipped_indices": [3, 9]}, 1.25)
    assert os.fspath(result) == str(tmp_path / "s") and Path(result) == tmp_path / "s"
    assert str(result) == f"1,234 rows -> {tmp_path / 's'} in 1.2 s; 2 skipped"
    assert "skipped" not in str(ConvertResult(tmp_path / "s", 5))
