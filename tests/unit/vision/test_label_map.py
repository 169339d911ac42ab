"""One class map for train and val: image folders numbered by a given map (``label_names=`` /
``class_to_idx=``), as text splits are. Without it a val folder missing a class numbered the others
differently from train, silently (torchvision's ImageFolder rule: the split's own sorted folders)."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
from vision_images import make_folder, photo, save

import stoker
from stoker.errors import ConfigError, InputError
from stoker.vision import ImageSource
from stoker.vision.finder import find_images


def _val_without_ant(tmp_path):
    """train: ant, moth, zebra; val: moth, zebra (no ant)."""
    train = make_folder(tmp_path / "t")
    val = make_folder(tmp_path / "v")
    shutil.rmtree(val / "ant")
    return train, val


def test_a_val_folder_missing_a_class_keeps_train_s_ids(tmp_path):
    train, val = _val_without_ant(tmp_path)
    assert find_images(val).class_to_idx == {"moth": 0, "zebra": 1}  # the split's own rule, as torchvision
    pinned = find_images(val, names=find_images(train).classes)
    assert pinned.classes == ("ant", "moth", "zebra")
    assert pinned.labels == (1,) * 4 + (2,) * 4


def test_convert_images_with_label_names_from_train(tmp_path):
    train, val = _val_without_ant(tmp_path)
    tr = stoker.convert.images(train, tmp_path / "tr")
    names = stoker.open(tr.path).metadata["classes"]
    va = stoker.convert.images(val, tmp_path / "va", label_names=names)
    store = stoker.open(va.path)
    assert store.metadata["class_to_idx"] == {"ant": 0, "moth": 1, "zebra": 2}
    labels = np.concatenate([b["label"].numpy() for b in stoker.Loader(store, batch_size=4, columns=["label"])])
    assert sorted(labels.tolist()) == [1] * 4 + [2] * 4
    by_dict = stoker.convert.images(val, tmp_path / "va2", class_to_idx={"ant": 0, "moth": 1, "zebra": 2})
    assert stoker.open(by_dict.path).metadata["classes"] == ["ant", "moth", "zebra"]


def test_a_class_folder_outside_the_map_is_an_error_naming_it(tmp_path):
    train, val = _val_without_ant(tmp_path)
    save(val / "wasp" / "a.jpg", photo(32, 32))
    with pytest.raises(InputError, match=r"\['wasp'\]"):
        stoker.convert.images(val, tmp_path / "va", label_names=["ant", "moth", "zebra"])
    assert not (tmp_path / "va").exists()


def test_a_flat_folder_s_label_outside_the_map_names_the_labels_file(tmp_path):
    for name in ("a.jpg", "b.jpg"):
        save(tmp_path / name, photo(16, 16))
    (tmp_path / "labels.csv").write_text("a.jpg,dog\nb.jpg,cat\n")
    assert find_images(tmp_path, names=["dog", "cat", "owl"]).labels == (0, 1)
    with pytest.raises(InputError, match=r"labels.csv.*\['cat'\]"):
        find_images(tmp_path, names=["dog", "owl"])


def test_a_torchvision_style_dataset_is_renumbered_by_name(tmp_path):
    class Folder:  # what torchvision's ImageFolder exposes
        classes = ["moth", "zebra"]
        samples = [("m.jpg", 0), ("z.jpg", 1)]
        root = str(tmp_path)

    assert find_images(Folder(), names=["ant", "moth", "zebra"]).labels == (1, 2)


def test_image_source_numbers_files_by_the_map_and_checks_a_store_s(tmp_path):
    train, val = _val_without_ant(tmp_path)
    eval_ = stoker.vision.eval_transforms(32)
    src = ImageSource(val, eval_, label_names=["ant", "moth", "zebra"])
    assert src.classes == ["ant", "moth", "zebra"]
    labels = np.concatenate([b["label"].numpy() for b in stoker.Loader(src, batch_size=4)])
    assert labels.tolist() == [1] * 4 + [2] * 4
    stoker.convert.images(val, tmp_path / "va")  # its own map: moth 0, zebra 1
    with pytest.raises(ConfigError, match="convert the images again"):
        ImageSource(tmp_path / "va", eval_, label_names=["ant", "moth", "zebra"])
    assert ImageSource(tmp_path / "va", eval_, label_names=["moth", "zebra"]).classes == ["moth", "zebra"]


def test_a_bad_map_is_refused():
    with pytest.raises(ConfigError, match="class_to_idx"):
        stoker.convert.images("unused", "unused", class_to_idx={"a": 0, "b": 2})


def test_a_split_numbered_otherwise_than_its_sibling_is_warned_of(tmp_path):
    """data/val without 'ant' numbered moth 0 and zebra 1 while data/train said 1 and 2, with no word."""
    from stoker.vision import SplitClassesWarning

    (tmp_path / "data").mkdir()
    make_folder(tmp_path / "t").rename(tmp_path / "data" / "train")
    val = make_folder(tmp_path / "v").rename(tmp_path / "data" / "val")
    shutil.rmtree(val / "ant")
    with pytest.warns(SplitClassesWarning, match=r"'moth' is label 0 here but 1 there \(missing here: \['ant'\]"):
        source = ImageSource(val, stoker.vision.eval_transforms(32))
    assert source.class_to_idx == {"moth": 0, "zebra": 1}  # torchvision's rule is kept; the warning names the cure
    with pytest.warns(SplitClassesWarning, match=r"label_names=train\.label_names"):
        stoker.convert.images(val, tmp_path / "va")
    with pytest.warns(SplitClassesWarning, match=r"'moth' is label 1 here but 0 there"):  # either way round
        train = ImageSource(tmp_path / "data" / "train", stoker.vision.eval_transforms(32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pinned = ImageSource(val, stoker.vision.eval_transforms(32), label_names=train.label_names)  # no warning
        assert pinned.class_to_idx == train.class_to_idx
        shutil.rmtree(val)
        shutil.copytree(tmp_path / "data" / "train", val)
        shutil.rmtree(val / "zebra")  # the last class missing: the shared classes keep their ids
        find_images(tmp_path / "data" / "train")
