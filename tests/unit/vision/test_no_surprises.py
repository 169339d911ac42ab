"""Issue 32 for images: rows of a shuffled batch in sampled order, no row left out unsaid, the class
map under torchvision's and the text loader's names, directory handles closed."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from vision_images import corrupt_files, photo, save

import stoker
from stoker.vision import ImageSource, eval_transforms, train_transforms
from stoker.vision.finder import find_images


def test_a_shuffled_batch_of_a_class_sorted_store_comes_in_sampled_order(folder, tmp_path):
    # the repro: a store converted from class folders holds its rows class by class
    store = stoker.convert.images(folder, tmp_path / "store", size=24, shard_size=20_000).path
    loader = stoker.Loader(ImageSource(store, train_transforms(16)), batch_size=8, shuffle=True, seed=3)
    rows = next(iter(loader.batch_sampler.batches(0)))
    labels = stoker.open(store).gather(rows, ["label"])["label"]
    assert not np.array_equal(labels, np.sort(labels))  # sorted rows would give sorted labels
    assert next(iter(loader))["label"].tolist() == labels.tolist()


def test_skipped_files_are_named_in_a_warning_and_batches_say_which_rows_they_hold(tmp_path):
    corrupt_files(tmp_path)
    src = ImageSource(tmp_path / "bad", train_transforms(16), on_error="skip")
    with pytest.warns(UserWarning, match=r"left out row \d+, .*\.jpg"):
        batches = list(stoker.Loader(src, batch_size=8, num_workers=0))
    left_out = {s.row for s in src.report()}
    assert left_out and [b["index"].tolist() for b in batches] == [sorted(set(range(len(src))) - left_out)]


def test_label_names_and_class_to_idx(folder, tmp_path):
    for data in (folder, stoker.convert.images(folder, tmp_path / "enc").path):
        src = ImageSource(data, eval_transforms(16))
        assert src.label_names == ("ant", "moth", "zebra")
        assert src.class_to_idx == {"ant": 0, "moth": 1, "zebra": 2}
    flat = tmp_path / "flat"
    save(flat / "a.png", photo(20, 20))
    unlabeled = ImageSource(flat, eval_transforms(16))
    assert unlabeled.label_names is None and unlabeled.class_to_idx is None


def test_finding_images_leaves_no_directory_open(folder):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        find_images(folder)
        gc.collect()  # an unclosed scandir iterator warns when it is collected
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
