"""Image files into a store: stoker.convert.images (convert/from_images.py)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from vision_images import corrupt_files, photo, save

import stoker
from stoker.errors import ConfigError, StoreExistsError
from stoker.vision import ImageError, decode, image_folder, probe


def test_encoded_store_keeps_jpeg_bytes_labels_and_classes(folder, tmp_path):
    report = stoker.convert.images(folder, tmp_path / "s", workers=2)
    ds = stoker.open(report.path)
    assert report.rows == len(ds) == 12 and not report.skipped and not report.report["skipped"]
    assert ds.schema["image"].kind == "binary"
    assert ds.metadata["classes"] == ["ant", "moth", "zebra"] and ds.metadata["mode"] == "encoded"
    assert ds.metadata["class_to_idx"] == {"ant": 0, "moth": 1, "zebra": 2}
    assert ds[:]["label"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert ds[0]["image"] == (folder / "ant" / "img0.jpg").read_bytes()  # byte for byte


def test_resized_store_holds_chw_arrays_of_the_center(folder, tmp_path):
    report = stoker.convert.images(folder, tmp_path / "r", "resized", size=32, workers=2)
    ds = stoker.open(report.path)
    assert ds.schema["image"].shape == (3, 32, 32) and ds.metadata["layout"] == "CHW"
    img = ds[0]["image"].transpose(1, 2, 0)
    src = np.asarray(Image.open(folder / "ant" / "img0.jpg").convert("RGB"))  # 60x87
    ref = np.asarray(Image.fromarray(src).resize((46, 32), Image.BILINEAR))[:, 7:39]  # torchvision's Resize, CenterCrop
    assert np.abs(img.astype(int) - ref.astype(int)).mean() <= 1.0


def test_non_jpeg_and_rotated_inputs_are_reencoded_upright(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(photo(20, 40)).save(tmp_path / "rot.jpg", exif=exif.tobytes())
    save(tmp_path / "alpha.png", np.dstack([photo(16, 16), np.full((16, 16), 128, np.uint8)]))
    Image.fromarray(photo(16, 24)).convert("CMYK").save(tmp_path / "cmyk.jpg")
    ds = stoker.open(stoker.convert.images(tmp_path, tmp_path / "s").path)
    shapes = []
    for blob in ds[:]["image"]:
        info = probe(blob)
        assert info.jpeg and info.orientation == 1
        shapes.append(decode(blob, info).shape)
    assert shapes == [(16, 16, 3), (16, 24, 3), (40, 20, 3)]  # alpha.png, cmyk.jpg, rot.jpg (sorted)


def test_max_side_caps_the_longer_side(tmp_path):
    save(tmp_path / "big.jpg", photo(100, 300))
    ds = stoker.open(stoker.convert.images(tmp_path, tmp_path / "s", max_side=150).path)
    info = probe(ds[0]["image"])
    assert (info.height, info.width) == (50, 150)


def test_bad_file_stops_the_conversion_naming_it(tmp_path):
    corrupt_files(tmp_path)
    with pytest.raises(ImageError, match=r"^corrupt.jpg: "):  # the first bad file in sorted order
        stoker.convert.images(tmp_path / "bad", tmp_path / "s", workers=1)
    assert not (tmp_path / "s").exists()


def test_skip_reports_every_bad_file_and_keeps_the_rest(tmp_path):
    corrupt_files(tmp_path)
    report = stoker.convert.images(tmp_path / "bad", tmp_path / "s", on_error="skip")
    assert report.rows == 1 and report.skipped == 4
    skipped = report.report["skipped"]
    assert sorted(s.file for s in skipped) == ["corrupt.jpg", "empty.jpg", "notes.jpg", "truncated.jpg"]
    meta = stoker.open(report.path).metadata
    assert meta["skipped_count"] == 4 and {s["file"] for s in meta["skipped"]} == {s.file for s in skipped}
    assert "4 skipped" in str(report)


def test_enormous_image_is_skipped_or_named(tmp_path):
    save(tmp_path / "imgs" / "huge.png", photo(200, 200))
    save(tmp_path / "imgs" / "ok.png", photo(20, 20))
    with pytest.raises(ImageError, match="huge.png.*enormous"):
        stoker.convert.images(tmp_path / "imgs", tmp_path / "s", max_pixels=10_000)
    assert stoker.convert.images(tmp_path / "imgs", tmp_path / "s", max_pixels=10_000, on_error="skip").rows == 1


def test_convert_a_torchvision_style_dataset_in_one_call(folder, tmp_path):
    class FakeImageFolder:
        def __init__(self, root):
            found = image_folder(root)
            self.root, self.classes, self.class_to_idx = str(root), list(found.classes), found.class_to_idx
            self.samples = list(zip(found.paths, found.labels))
            self.transform = lambda x: 1 / 0  # never run: the files are read directly

    report = stoker.convert.images(FakeImageFolder(folder), tmp_path / "s", "resized", size=16)
    ds = stoker.open(report.path)
    assert len(ds) == 12 and ds.metadata["classes"] == ["ant", "moth", "zebra"]
    with pytest.raises(ConfigError):
        stoker.convert.images(object(), tmp_path / "t")


def test_existing_store_needs_overwrite(folder, tmp_path):
    stoker.convert.images(folder, tmp_path / "s")
    with pytest.raises(StoreExistsError):
        stoker.convert.images(folder, tmp_path / "s")
    assert stoker.convert.images(folder, tmp_path / "s", overwrite=True).rows == 12


def test_bad_options(folder, tmp_path):
    for kw in ({"mode": "jpeg"}, {"quality": 0}, {"on_error": "ignore"}, {"size": 0}, {"max_side": 2}):
        with pytest.raises(ConfigError):
            stoker.convert.images(folder, tmp_path / "s", **kw)


def test_progress_callback_counts_every_file(folder, tmp_path):
    seen = []
    stoker.convert.images(folder, tmp_path / "s", progress=seen.append)
    assert sum(seen) == 12


def test_each_row_keeps_its_source_file_relative_to_the_root(folder, tmp_path):
    ds = stoker.open(stoker.convert.images(folder, tmp_path / "s", workers=2).path)
    assert ds.schema["path"].kind == "string"
    assert ds[:]["path"] == [f"{c}/img{i}.jpg" for c in ("ant", "moth", "zebra") for i in range(4)]
    assert ds.metadata["root"] == str(folder)
    resized = stoker.open(stoker.convert.images(folder, tmp_path / "r", "resized", size=16).path)
    assert resized[5]["path"] == "moth/img1.jpg"


def test_skipped_files_leave_no_path_behind(tmp_path):
    files = corrupt_files(tmp_path)
    ds = stoker.open(stoker.convert.images(tmp_path / "bad", tmp_path / "s", on_error="skip").path)
    assert ds[:]["path"] == ["good.jpg"] and files
