"""A plain loader over a store of encoded images says that its batches hold JPEG bytes."""

from __future__ import annotations

import warnings

import pytest

import stoker
from stoker.pipeline.inputs import EncodedImagesWarning


def test_a_plain_loader_over_encoded_images_says_how_to_get_images(folder, tmp_path):
    """Before, stoker.Loader(encoded store) silently handed out lists of JPEG bytes."""
    store = stoker.convert.images(folder, tmp_path / "enc").path
    with pytest.warns(EncodedImagesWarning, match=r"lists of JPEG bytes.*stoker\.vision\.ImageSource") as caught:
        loader = stoker.Loader(store, batch_size=4)
    assert caught[0].filename == __file__  # points at the user's line, not at stoker's
    batch = next(iter(loader))
    assert isinstance(batch["image"], list) and isinstance(batch["image"][0], bytes)


def test_named_columns_or_decoded_stores_do_not_warn(folder, tmp_path):
    encoded = stoker.convert.images(folder, tmp_path / "enc").path
    resized = stoker.convert.images(folder, tmp_path / "res", mode="resized", size=32).path
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stoker.Loader(encoded, batch_size=4, columns=["image", "label"])  # the bytes are wanted
        stoker.Loader(resized, batch_size=4)
        stoker.Loader(stoker.vision.ImageSource(encoded, stoker.vision.train_transforms(32)), batch_size=4)
