"""render.py: one image's crop, resample, flip and write, against torch's interpolate and Pillow's resize."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from vision_images import photo, save

from stoker.vision.decode import decode, orient, probe
from stoker.vision.render import box_in, render_array, render_bytes, resample
from stoker.vision.transforms import View


def png16_rgb(rgb: np.ndarray) -> bytes:
    """A 16-bit RGB PNG written by hand (Pillow cannot write one)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    h, w = rgb.shape[:2]
    raw = b"".join(b"\x00" + row.tobytes() for row in rgb.astype(">u2"))
    header = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def reference(crop_hwc: np.ndarray, view: View, mode: str) -> torch.Tensor:
    """The CHW result written out op by op with torch's public interpolate (torchvision v2's kernel)."""
    img = torch.from_numpy(np.array(crop_hwc)).permute(2, 0, 1)[None]
    if img.shape[2:] != (view.height, view.width):
        img = F.interpolate(
            img,
            size=(view.height, view.width),
            mode=mode,
            antialias=mode != "nearest",
            align_corners=None if mode == "nearest" else False,
        )
    return img[0].flip(-1) if view.flip else img[0]


def random_case(rng: np.random.Generator, k: int) -> tuple[np.ndarray, View]:
    h, w = (int(v) for v in rng.integers(2, 90, 2))
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    if k % 4 == 1:
        img = orient(img, int(rng.integers(2, 9)))  # what decode gives for an EXIF-rotated JPEG: a strided view
    h, w = img.shape[:2]
    left, top = rng.uniform(0, w - 1), rng.uniform(0, h - 1)
    right, bottom = rng.uniform(left + 0.5, w), rng.uniform(top + 0.5, h)
    if k % 5 == 0:  # a pure crop: the box on whole pixels and no resample
        left, top, right, bottom = int(left), int(top), int(right) + 1, int(bottom) + 1
        out_h, out_w = bottom - top, right - left
    else:
        out_h, out_w = (int(v) for v in rng.integers(1, 70, 2))
    return img, View(left, top, right, bottom, out_h, out_w, bool(k % 2))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
@pytest.mark.parametrize("channels_first", [True, False])
def test_resample_equals_torch_interpolate_for_random_crops_flips_and_sizes(mode, channels_first):
    rng = np.random.default_rng(hash((mode, channels_first)) % 2**32)
    for k in range(120):
        img, view = random_case(rng, k)
        top, bottom, left, right = box_in(img.shape[0], img.shape[1], img.shape[0], img.shape[1], view)
        crop = img[top:bottom, left:right]
        shape = (3, view.height, view.width) if channels_first else (view.height, view.width, 3)
        as_tensor = torch.full(shape, 7, dtype=torch.uint8)
        as_array = np.full(shape, 7, dtype=np.uint8)
        resample(crop, view, mode, as_tensor, channels_first)
        resample(crop, view, mode, as_array, channels_first)
        want = reference(crop, view, mode)
        want = want if channels_first else want.permute(1, 2, 0)
        assert torch.equal(as_tensor, want), (k, view)
        assert np.array_equal(as_array, want.numpy()), (k, view)


def test_a_one_row_crop_of_a_rotated_image_renders():
    """A crop one pixel high of an upside-down decode is a view with a negative stride on a dimension of
    size 1; ``np.ascontiguousarray`` keeps that stride and ``torch.from_numpy`` refused it."""
    img = orient(photo(40, 30), 4)
    view = View(3.0, 10.0, 23.0, 11.0, 4, 8, False)
    top, bottom, left, right = box_in(40, 30, 40, 30, view)
    out = torch.zeros((3, 4, 8), dtype=torch.uint8)
    resample(img[top:bottom, left:right], view, "bilinear", out, True)
    assert torch.equal(out, reference(img[top:bottom, left:right], view, "bilinear"))


def test_resample_is_close_to_pillow_resize_of_the_same_box():
    """torchvision's PIL path crops and resizes with ``Image.resize(box=...)``: stoker's kernel stays close."""
    img = photo(300, 400, seed=3)
    rng = np.random.default_rng(1)
    for _ in range(20):
        left, top = int(rng.integers(0, 200)), int(rng.integers(0, 150))
        right, bottom = left + int(rng.integers(60, 200)), top + int(rng.integers(60, 150))
        view = View(left, top, right, bottom, 56, 48, bool(rng.integers(0, 2)))
        out = np.zeros((56, 48, 3), np.uint8)
        resample(img[top:bottom, left:right], view, "bilinear", out, False)
        pil = Image.fromarray(img).resize((48, 56), Image.BILINEAR, box=(left, top, right, bottom))
        if view.flip:
            pil = pil.transpose(Image.FLIP_LEFT_RIGHT)
        assert np.abs(out.astype(int) - np.asarray(pil).astype(int)).max() <= 2


@pytest.mark.parametrize("kind", ["gray", "rgba", "gray16", "rgb16", "rotated_jpeg"])
def test_render_bytes_of_every_decoded_kind_equals_decode_then_reference(tmp_path, kind):
    base = photo(48, 64, seed=5)
    if kind == "gray":
        path = save(tmp_path / "a.png", base[:, :, 0])
    elif kind == "rgba":
        path = save(tmp_path / "a.png", np.dstack([base, np.full((48, 64), 90, np.uint8)]))
    elif kind == "gray16":
        path = tmp_path / "a.png"
        Image.fromarray(base[:, :, 1].astype(np.uint16) * 257).save(path)
    elif kind == "rgb16":
        path = tmp_path / "a.png"
        path.write_bytes(png16_rgb(base.astype(np.uint16) * 257))
    else:
        exif = Image.Exif()
        exif[0x0112] = 8
        path = save(tmp_path / "a.jpg", base, exif=exif.tobytes(), quality=95)
    data = path.read_bytes()
    info = probe(data)
    for k, view in enumerate(
        [View(3.5, 2.0, 40.0, 30.0, 16, 20, False), View(0.0, 0.0, info.width, info.height, 9, 7, True)]
    ):
        for channels_first in (True, False):
            shape = (3, view.height, view.width) if channels_first else (view.height, view.width, 3)
            out = torch.zeros(shape, dtype=torch.uint8)
            render_bytes(data, info, view, "bilinear", out, channels_first, reduce=False)
            full = decode(data, info)
            top, bottom, left, right = box_in(full.shape[0], full.shape[1], info.height, info.width, view)
            want = reference(full[top:bottom, left:right], view, "bilinear")
            assert torch.equal(out, want if channels_first else want.permute(1, 2, 0)), (kind, k, channels_first)


def test_render_array_of_a_chw_row_equals_the_reference():
    chw = np.ascontiguousarray(photo(64, 64, seed=2).transpose(2, 0, 1))
    for view in (View(5.0, 7.0, 50.0, 60.0, 32, 32, True), View(8.0, 8.0, 40.0, 40.0, 32, 32, True)):
        out = np.zeros((32, 32, 3), np.uint8)
        render_array(chw, view, "bilinear", out, False)
        top, bottom, left, right = box_in(64, 64, 64, 64, view)
        want = reference(chw[:, top:bottom, left:right].transpose(1, 2, 0), view, "bilinear").permute(1, 2, 0)
        assert np.array_equal(out, want.numpy())


def test_threads_rendering_flipped_views_at_once_do_not_share_a_scratch_row():
    img = photo(120, 160, seed=4)
    views = [View(float(k), float(k), 100.0 + k, 90.0 + k, 33, 45, True) for k in range(8)]
    wants = []
    for view in views:
        top, bottom, left, right = box_in(120, 160, 120, 160, view)
        wants.append(reference(img[top:bottom, left:right], view, "bilinear").numpy())
    bad: list[int] = []

    def work(k: int) -> None:
        view, out = views[k], np.zeros((3, 33, 45), np.uint8)
        top, bottom, left, right = box_in(120, 160, 120, 160, view)
        for _ in range(200):
            resample(img[top:bottom, left:right], view, "bilinear", out, True)
            if not np.array_equal(out, wants[k]):
                bad.append(k)
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(views))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_an_unknown_interpolation_is_a_config_error():
    from stoker.errors import ConfigError

    out = np.zeros((3, 8, 8), np.uint8)
    with pytest.raises(ConfigError, match="interpolation"):
        resample(photo(20, 20), View(0.0, 0.0, 20.0, 20.0, 8, 8, False), "area", out, True)
