"""A store path that cannot be written fails when the writer is made, naming the path the user gave."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.errors import StoreWriteError
from stoker.store.writer import StoreWriter


def test_a_file_in_the_way_fails_at_construction_naming_the_store(tmp_path):
    (tmp_path / "afile").write_text("not a directory")
    store = tmp_path / "afile" / "sub" / "store"
    with pytest.raises(StoreWriteError) as info:
        StoreWriter(store)  # no row added yet: nothing was worked on
    message = str(info.value)
    assert str(store) in message and "is a file, not a directory" in message
    assert ".tmp-" not in message  # not the hidden working directory
    assert info.value.filename == str(store)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_path_under_proc_fails_before_the_work():
    seen = []

    def rows():  # the conversion's work: never started
        seen.append(1)
        yield {"x": np.zeros(3)}

    with pytest.raises(StoreWriteError) as info:
        stoker.convert.arrays({"x": np.arange(10)}, "/proc/stoker-nope/store")
    assert "/proc/stoker-nope/store" in str(info.value) and ".tmp-" not in str(info.value)
    with pytest.raises(StoreWriteError):
        with StoreWriter("/proc/stoker-nope") as writer:
            for row in rows():
                writer.add(row)
    assert seen == []


def test_the_check_leaves_nothing_behind(tmp_path):
    parent = tmp_path / "out"
    parent.mkdir()
    writer = StoreWriter(parent / "store")
    assert os.listdir(parent) == []  # the probe directory is gone, no parent made early
    writer.add({"x": np.arange(3)})
    writer.close()
    assert sorted(os.listdir(parent)) == ["store"]


def test_missing_parents_are_still_made(tmp_path):
    store = tmp_path / "a" / "b" / "store"
    with StoreWriter(store) as writer:
        writer.add({"x": np.arange(3)})
    assert stoker.open(store)[0]["x"].tolist() == [0, 1, 2]
