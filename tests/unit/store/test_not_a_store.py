"""Opening raw data as a store says what the path holds and how to read it (store/not_a_store.py).
It said "it is not a stoker store, or its writer was interrupted" for an image folder too."""

from __future__ import annotations

import pytest

import stoker
from stoker.errors import ManifestError, StoreNotFoundError


def test_an_image_folder_names_image_source_and_convert_images(tmp_path):
    for cls in ("cat", "dog"):
        (tmp_path / "photos" / cls).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "photos" / cls / f"{i}.JPG").write_bytes(b"x")
    with pytest.raises(ManifestError) as got:
        stoker.open(tmp_path / "photos")
    message = str(got.value)
    assert "stoker.vision.ImageSource(" in message and "stoker convert images" in message
    assert str(tmp_path / "photos") in message and "interrupted" not in message


def test_a_text_file_and_an_hdf5_file_say_how_to_read_them(tmp_path):
    (tmp_path / "train.tsv").write_text("a\t1\n")
    (tmp_path / "x.h5").write_bytes(b"\x89HDF")
    with pytest.raises(StoreNotFoundError, match=r"stoker\.text\.Loader\(.*train\.tsv"):
        stoker.open(tmp_path / "train.tsv")
    with pytest.raises(StoreNotFoundError, match=r"stoker convert hdf5 .*x\.h5"):
        stoker.Loader(str(tmp_path / "x.h5"), batch_size=2)


def test_a_folder_with_shards_and_no_manifest_was_interrupted(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "shard-00000.arrow").write_bytes(b"")
    with pytest.raises(ManifestError, match="1 shard file.*interrupted"):
        stoker.open(tmp_path / "s")


def test_a_mixed_folder_gets_no_guess(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.jpg").write_bytes(b"x")
    for name in ("b.bin", "c.bin", "d.py"):
        (tmp_path / "m" / name).write_bytes(b"x")
    with pytest.raises(ManifestError, match="it is not a stoker store") as got:
        stoker.open(tmp_path / "m")
    assert "ImageSource" not in str(got.value)
