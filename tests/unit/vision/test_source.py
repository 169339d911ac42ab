from __future__ import annotations

import numpy as np
import pytest
import torch
from vision_images import bad_store, corrupt_files, photo, save

import stoker
from stoker.errors import ConfigError
from stoker.vision import (
    CenterCrop,
    ImageError,
    ImageSource,
    Normalize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
    eval_transforms,
    train_transforms,
)
from stoker.vision.readers import GatherArrays


@pytest.fixture
def encoded(folder, tmp_path):
    return stoker.convert.images(folder, tmp_path / "enc").path


def images(loader) -> list[torch.Tensor]:
    return [b["image"].clone() for b in loader]


def test_training_batches_are_uint8_nchw_with_labels(encoded):
    src = ImageSource(encoded, [RandomResizedCrop(24), RandomHorizontalFlip()])
    batches = list(stoker.Loader(src, batch_size=5, shuffle=True, num_workers=2))
    assert [tuple(b["image"].shape) for b in batches] == [(5, 3, 24, 24), (5, 3, 24, 24), (2, 3, 24, 24)]
    assert all(b["image"].dtype == torch.uint8 and b["label"].dtype == torch.int64 for b in batches)
    assert sorted(torch.cat([b["label"] for b in batches]).tolist()) == [0] * 4 + [1] * 4 + [2] * 4
    assert src.classes == ["ant", "moth", "zebra"]


def test_eval_pixels_match_a_pil_resize_and_center_crop(folder, encoded):
    from PIL import Image

    src = ImageSource(encoded, [Resize(32), CenterCrop(28)])
    first = next(iter(stoker.Loader(src, batch_size=1)))["image"][0].permute(1, 2, 0).numpy()
    im = Image.open(folder / "ant" / "img0.jpg").convert("RGB")  # 80x60 -> 42x32 -> center 28x28
    ref = np.asarray(im.resize((42, 32), Image.BILINEAR))[2:30, 7:35]
    # one resample of the box (cut on whole source pixels) vs resize-then-crop: sub-pixel shifts only
    assert np.abs(first.astype(int) - ref.astype(int)).mean() < 6
    assert np.corrcoef(first.ravel(), ref.ravel())[0, 1] > 0.97


def test_nhwc_layout_and_normalize_on_finalize(encoded):
    u8 = ImageSource(encoded, eval_transforms(16, normalize=False), layout="NHWC")
    f32 = ImageSource(encoded, eval_transforms(16), layout="NHWC")
    a = next(iter(stoker.Loader(u8, batch_size=4)))["image"]
    b = next(iter(stoker.Loader(f32, batch_size=4)))["image"]
    assert a.shape == (4, 16, 16, 3) and a.dtype == torch.uint8 and b.dtype == torch.float32
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    assert torch.allclose(b, (a.float() / 255 - mean) / std, atol=1e-5)
    half = ImageSource(encoded, eval_transforms(16), dtype="float16")
    assert next(iter(stoker.Loader(half, batch_size=2)))["image"].dtype == torch.float16
    scaled = ImageSource(encoded, eval_transforms(16, normalize=False), dtype="float32")
    assert float(next(iter(stoker.Loader(scaled, batch_size=2)))["image"].max()) <= 1.0


def test_augmentation_is_the_same_for_any_worker_count_and_resumes(encoded):
    def loader(workers):
        return stoker.Loader(
            ImageSource(encoded, train_transforms(16), seed=7), batch_size=3, shuffle=True, num_workers=workers, seed=1
        )

    ref = images(loader(0))
    assert all(torch.equal(x, y) for x, y in zip(ref, images(loader(2))))
    resumed = loader(2)
    it = iter(resumed)
    next(it), next(it)
    state = resumed.state_dict()
    it.close()
    again = loader(1)
    again.load_state_dict(state)
    assert all(torch.equal(x, y) for x, y in zip(ref[2:], images(again)))


def test_each_epoch_draws_new_crops(encoded):
    loader = stoker.Loader(ImageSource(encoded, [RandomResizedCrop(16)]), batch_size=12)
    first, second = images(loader), images(loader)
    assert not torch.equal(first[0], second[0])
    other_seed = stoker.Loader(ImageSource(encoded, [RandomResizedCrop(16)], seed=1), batch_size=12)
    assert not torch.equal(first[0], images(other_seed)[0])


def test_resized_store_loads_without_decoding(folder, tmp_path):
    store = stoker.convert.images(folder, tmp_path / "r", "resized", size=20).path
    plain = next(iter(stoker.Loader(store, batch_size=12)))
    src = ImageSource(store)
    assert src.size == (20, 20) and isinstance(src.reader, GatherArrays)
    batch = next(iter(stoker.Loader(src, batch_size=12)))
    assert torch.equal(batch["image"], plain["image"]) and torch.equal(batch["label"], plain["label"])
    crop = next(iter(stoker.Loader(ImageSource(store, [CenterCrop(10), Normalize()]), batch_size=12)))["image"]
    assert crop.shape == (12, 3, 10, 10) and crop.dtype == torch.float32
    flipped = next(iter(stoker.Loader(ImageSource(store, [RandomHorizontalFlip(1.0)]), batch_size=12)))["image"]
    assert torch.equal(flipped, plain["image"].flip(-1))


def test_straight_from_files_without_a_store(folder):
    src = ImageSource(folder, eval_transforms(16))
    batch = next(iter(stoker.Loader(src, batch_size=12, num_workers=2)))
    assert batch["image"].shape == (12, 3, 16, 16) and batch["label"].tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_images_smaller_than_the_crop_are_upscaled_by_random_resized_crop(tmp_path):
    save(tmp_path / "tiny" / "a.png", photo(5, 7))
    batch = next(iter(stoker.Loader(ImageSource(tmp_path / "tiny", train_transforms(32)), batch_size=1)))
    assert batch["image"].shape == (1, 3, 32, 32)
    with pytest.raises(ImageError, match="a.png.*smaller than the 32x32 crop"):
        next(iter(stoker.Loader(ImageSource(tmp_path / "tiny", [CenterCrop(32)]), batch_size=1)))


def test_bad_rows_in_a_store_raise_naming_the_row(tmp_path):
    src = ImageSource(bad_store(tmp_path), train_transforms(16))
    with pytest.raises(ImageError, match="row 1"):
        list(stoker.Loader(src, batch_size=7, num_workers=2, timeout=60))


def test_a_row_out_of_range_is_named(folder, encoded):
    for data in (folder, encoded):
        with pytest.raises(IndexError, match="row 19 is out of range"):
            ImageSource(data, train_transforms(16)).read([np.array([0, 19])])


def test_bad_rows_are_skipped_and_reported_without_hanging(tmp_path):
    src = ImageSource(bad_store(tmp_path), train_transforms(16), on_error="skip")
    batches = list(stoker.Loader(src, batch_size=3, num_workers=2, timeout=60))
    assert torch.cat([b["label"] for b in batches]).tolist() == [0, 2, 6]
    assert [s.row for s in src.report()] == [1, 3, 4, 5]
    assert all("row" in s.file and s.reason for s in src.report())


def test_bad_files_are_skipped_and_named(tmp_path):
    corrupt_files(tmp_path)
    save(tmp_path / "bad" / "huge.png", photo(300, 300))
    src = ImageSource(tmp_path / "bad", train_transforms(16), on_error="skip", max_pixels=50_000)
    batches = list(stoker.Loader(src, batch_size=2, num_workers=2, timeout=60))
    assert sum(len(b["image"]) for b in batches) == 1
    assert sorted(s.file for s in src.report()) == [
        "corrupt.jpg",
        "empty.jpg",
        "huge.png",
        "notes.jpg",
        "truncated.jpg",
    ]


def test_configuration_errors(encoded, tmp_path):
    with pytest.raises(ConfigError, match="fixed size"):
        ImageSource(encoded, [Resize(32)])
    with pytest.raises(ConfigError, match="layout"):
        ImageSource(encoded, train_transforms(8), layout="CHW")
    with pytest.raises(ConfigError, match="floating"):
        ImageSource(encoded, train_transforms(8), dtype="uint8")
    with pytest.raises(ConfigError, match="no column"):
        ImageSource(encoded, train_transforms(8), image_column="pixels")
    with pytest.raises(ConfigError):
        ImageSource(encoded, train_transforms(8), on_error="ignore")


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_rotated_jpeg_with_reduced_scale_decode_matches_pil(tmp_path, orientation):
    from PIL import Image, ImageOps

    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / "rot" / "a.jpg"
    path.parent.mkdir()
    Image.fromarray(photo(200, 400, seed=2)).save(path, exif=exif.tobytes(), quality=95)
    got = next(iter(stoker.Loader(ImageSource(path.parent, [Resize(40), CenterCrop(40)]), batch_size=1)))["image"][0]
    upright = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    w, h = upright.size
    small = upright.resize((40, 80) if h > w else (80, 40), Image.BILINEAR)
    ref = np.asarray(small)[20:60] if h > w else np.asarray(small)[:, 20:60]
    assert np.corrcoef(got.permute(1, 2, 0).numpy().ravel(), ref.ravel())[0, 1] > 0.95


def test_image_batches_fill_the_loader_buffers(encoded):
    src = ImageSource(encoded, [RandomResizedCrop(16), RandomHorizontalFlip()])  # uint8: no finalize on the CPU
    loader = stoker.Loader(src, batch_size=4, num_workers=2, engine="threads")  # processes fill shared slots
    assert src._pool is loader.transfer.pool
    batch = next(iter(loader))
    pool_buffers = [b for bufs in loader.transfer.pool._free.values() for b in bufs]
    assert any(batch["image"].data_ptr() == b.ctypes.data for b in pool_buffers)


@pytest.mark.gpu
def test_cuda_image_batches_are_gathered_into_pinned_buffers(encoded):
    """No staging copy: worker threads resample straight into the loader's pinned buffers."""
    loader = stoker.Loader(ImageSource(encoded, train_transforms(16)), batch_size=4, device="cuda", num_workers=2)
    for _ in range(2):
        batches = list(loader)
    assert all(b["image"].is_cuda for b in batches)
    buffers = [b for bufs in loader.transfer.pool._free.values() for b in bufs if b.shape[1:] == (3, 16, 16)]
    assert buffers and all(torch.from_numpy(b).is_pinned() for b in buffers)


def test_default_threads_are_capped_for_per_image_work_and_processes_are_not(encoded, monkeypatch):
    from stoker.pipeline import schedule
    from stoker.vision.readers import CpuDecode

    monkeypatch.setattr(schedule, "usable_cores", lambda: 16)
    loader = stoker.Loader(ImageSource(encoded, train_transforms(16)), batch_size=4)
    assert loader.engine == "processes" and loader.num_workers == 16
    assert loader.schedule.set_by["workers"].startswith("default")
    loader = stoker.Loader(ImageSource(encoded, train_transforms(16)), batch_size=4, engine="threads")
    assert loader.engine == "threads" and loader.num_workers == schedule.GIL_THREADS == 8
    monkeypatch.setattr(CpuDecode, "holds_gil", False)  # a reader of one GIL-free call: one thread per core
    loader = stoker.Loader(ImageSource(encoded, train_transforms(16)), batch_size=4)
    assert loader.engine == "threads" and loader.num_workers == 16
    assert stoker.Loader(ImageSource(encoded, train_transforms(16)), batch_size=4, num_workers=12).num_workers == 12


def test_threads_asked_for_by_engine_are_capped_too(encoded, monkeypatch):
    """engine="threads" on a source whose own default is processes: the cap is on threads, whichever
    engine the source prefers (it was applied only when the source's default was threads: 16 threads
    here), and a Subset keeps it."""
    from stoker.pipeline import schedule

    monkeypatch.setattr(schedule, "usable_cores", lambda: 16)
    src = ImageSource(encoded, train_transforms(16))
    assert stoker.Loader(src, batch_size=4).engine == "processes"
    assert stoker.Loader(src, batch_size=4, engine="threads").num_workers == 8
    assert stoker.Loader(src, batch_size=4, engine="processes").num_workers == 16
    assert stoker.Loader(stoker.Subset(src, range(8)), batch_size=4, engine="threads").num_workers == 8


def test_a_store_row_traces_back_to_its_file(folder, encoded):
    src = ImageSource(encoded, [Resize(20), CenterCrop(16)])
    assert src.describe(5) == f"moth/img1.jpg ({encoded} row 5)"
    samples = src.samples
    assert samples[5] == (str(folder / "moth" / "img1.jpg"), 1)
    assert samples == [(str(p), label) for p, label in ImageSource(folder, [CenterCrop(16)]).samples]
    assert "path" not in next(iter(stoker.Loader(src, batch_size=4)))  # not read unless asked
    with_paths = ImageSource(encoded, [Resize(20), CenterCrop(16)], with_paths=True)
    batch = next(iter(stoker.Loader(with_paths, batch_size=4, shuffle=True)))
    names = [f"{c}/img{i}.jpg" for c in ("ant", "moth", "zebra") for i in range(4)]
    assert len(batch["path"]) == 4 and set(batch["path"]) <= set(names)
    assert [names.index(p) // 4 for p in batch["path"]] == batch["label"].tolist()  # each path beside its label


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_a_bad_row_of_a_store_is_reported_with_its_file(encoded, engine):
    src = ImageSource(encoded, [CenterCrop(65)])  # ant/img0.jpg is 80x60: smaller than the crop
    # worker processes raise the first failure to arrive, which may be a later batch's (every image is too small)
    bad = r"ant/img0\.jpg \(.* row 0\)" if engine == "threads" else r"\w+/img\d\.jpg \(.* row \d+\), row \d+"
    with pytest.raises(ImageError, match=bad):
        list(stoker.Loader(src, batch_size=4, engine=engine))


def test_stores_without_a_path_column_still_load(tmp_path):
    store = bad_store(tmp_path)  # written around the converter: image and label only
    src = ImageSource(store, [CenterCrop(16)], on_error="skip")
    assert len(list(stoker.Loader(src, batch_size=7))[0]["image"]) == 3
    assert src.describe(2) == f"{store} row 2"
    with pytest.raises(ConfigError, match="no 'path' column"):
        _ = src.samples
    with pytest.raises(ConfigError, match="with_paths"):
        ImageSource(store, [CenterCrop(16)], with_paths=True)
