from __future__ import annotations

import json

import pytest
from vision_images import photo, save

from stoker.errors import ConfigError, EmptyDatasetError
from stoker.vision.finder import find_images, flat_folder, from_dataset, from_paths, image_folder


def test_image_folder_sorts_classes_and_files(folder):
    (folder / "ant" / "README.txt").write_text("not an image")
    images = image_folder(folder)
    assert images.classes == ("ant", "moth", "zebra")
    assert images.class_to_idx == {"ant": 0, "moth": 1, "zebra": 2}
    assert len(images) == 12
    assert images.labels == (0,) * 4 + (1,) * 4 + (2,) * 4
    assert [images.name(i) for i in range(4)] == [f"ant/img{i}.jpg" for i in range(4)]
    assert images.ignored == (str(folder / "ant" / "README.txt"),)
    assert find_images(folder) == images


def test_image_folder_with_an_empty_class_says_which(folder):
    (folder / "empty_class").mkdir()
    with pytest.raises(EmptyDatasetError, match="empty_class"):
        image_folder(folder)


def test_flat_folder_with_csv_labels(tmp_path):
    for name in ("a.jpg", "b.png", "c.jpg"):
        save(tmp_path / name, photo(8, 8))
    (tmp_path / "labels.csv").write_text("file,label\nc.jpg,dog\na.jpg,cat\nb.png,dog\n")
    images = find_images(tmp_path)
    assert images.classes == ("cat", "dog")
    assert [images.name(i) for i in range(3)] == ["c.jpg", "a.jpg", "b.png"]
    assert images.labels == (1, 0, 1)


def test_flat_folder_with_json_labels_and_integer_labels(tmp_path):
    for name in ("a.jpg", "b.jpg"):
        save(tmp_path / name, photo(8, 8))
    (tmp_path / "y.json").write_text(json.dumps([{"file": "a.jpg", "label": 3}, {"file": "b.jpg", "label": 7}]))
    images = flat_folder(tmp_path, tmp_path / "y.json")
    assert images.labels == (3, 7) and images.classes is None
    (tmp_path / "z.json").write_text(json.dumps({"b.jpg": "x", "a.jpg": "y"}))
    assert flat_folder(tmp_path, tmp_path / "z.json").labels == (0, 1)


def test_flat_folder_without_labels(tmp_path):
    for name in ("b.jpg", "a.jpg"):
        save(tmp_path / name, photo(8, 8))
    (tmp_path / "notes.txt").write_text("x")
    images = find_images(tmp_path)
    assert images.labels is None and [images.name(i) for i in range(2)] == ["a.jpg", "b.jpg"]
    assert len(images.ignored) == 1


def test_bad_labels_file_is_a_config_error(tmp_path):
    (tmp_path / "labels.csv").write_text("only_one_column\n")
    with pytest.raises(ConfigError, match="file,label"):
        find_images(tmp_path)


def test_list_of_paths_with_named_labels(tmp_path):
    paths = [save(tmp_path / f"{i}.jpg", photo(8, 8)) for i in range(3)]
    images = from_paths(paths, ["b", "a", "b"])
    assert images.classes == ("a", "b") and images.labels == (1, 0, 1)
    with pytest.raises(ConfigError):
        from_paths(paths, [0, 1])


def test_torchvision_style_dataset_object(folder):
    class FakeImageFolder:  # the attributes torchvision.datasets.ImageFolder has
        def __init__(self, root):
            found = image_folder(root)
            self.root = str(root)
            self.classes = list(found.classes)
            self.class_to_idx = found.class_to_idx
            self.samples = list(zip(found.paths, found.labels))

    images = from_dataset(FakeImageFolder(folder))
    assert images.classes == ("ant", "moth", "zebra") and len(images) == 12
    assert find_images(FakeImageFolder(folder)).labels == images.labels
    with pytest.raises(ConfigError, match="samples"):
        from_dataset(object())


def test_missing_source_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        find_images(tmp_path / "nope")
