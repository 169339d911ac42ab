"""StoreSource: columns= as a list (select) or a mapping (select and rename)."""

from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.errors import ConfigError


@pytest.fixture
def store(tmp_path):
    cols = {
        "train/x": np.arange(12, dtype=np.float32).reshape(6, 2),
        "train/y": np.arange(6),
        "ids": [np.arange(i + 1, dtype=np.int32) for i in range(6)],
    }
    return stoker.write(tmp_path / "s", cols)


def test_a_mapping_selects_and_renames(store):
    batch = next(iter(stoker.Loader(store, batch_size=3, columns={"train/x": "x", "ids": "input_ids"})))
    assert set(batch) == {"x", "input_ids", "input_ids_lengths"}  # lengths follow the new name
    np.testing.assert_array_equal(batch["x"].numpy(), np.arange(6, dtype=np.float32).reshape(3, 2))
    np.testing.assert_array_equal(batch["input_ids_lengths"].numpy(), [1, 2, 3])
    assert stoker.LoaderConfig(columns={"a": "b"}).columns == {"a": "b"}


def test_a_list_keeps_its_meaning(store):
    batch = next(iter(stoker.Loader(store, batch_size=2, columns=["train/y"])))
    assert set(batch) == {"train/y"}
    assert stoker.LoaderConfig(columns=["a", "b"]).columns == ("a", "b")


@pytest.mark.parametrize(
    ("columns", "match"),
    [
        ({"train/x": "x", "train/y": "x"}, "two columns the name 'x'"),
        ({"nope": "x"}, r"no column\(s\) \['nope'\]"),
        ({"train/y": "ids_lengths", "ids": "ids"}, "batch key 'ids_lengths' twice"),
        ({"train/y": ""}, "non-empty strings"),
        ("train/y", "a list of column names or a mapping"),
    ],
)
def test_bad_columns_are_refused(store, columns, match):
    with pytest.raises(ConfigError, match=match) as info:
        stoker.Loader(store, batch_size=2, columns=columns)
    assert info.value.option == "columns"
