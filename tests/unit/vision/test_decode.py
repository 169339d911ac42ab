from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps
from vision_images import corrupt_files, photo, save

from stoker.vision.decode import decode, probe, read_file
from stoker.vision.errors import ImageError


def reference(path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


@pytest.mark.parametrize(
    "fmt,mode,ext",
    [
        ("JPEG", "RGB", "jpg"),
        ("PNG", "RGB", "png"),
        ("WEBP", "RGB", "webp"),
        ("PNG", "L", "png"),
        ("JPEG", "L", "jpg"),
        ("PNG", "RGBA", "png"),
        ("JPEG", "CMYK", "jpg"),
        ("PNG", "P", "png"),
    ],
)
def test_every_format_and_mode_comes_out_rgb(tmp_path, fmt, mode, ext):
    arr = photo(40, 56)
    img = Image.fromarray(arr).convert(mode)
    path = tmp_path / f"x.{ext}"
    img.save(path, fmt)
    data = read_file(path)
    info = probe(data)
    out = decode(data, info)
    assert out.shape == (40, 56, 3) and out.dtype == np.uint8
    assert (info.height, info.width) == (40, 56)
    assert np.abs(out.astype(int) - reference(path).astype(int)).mean() < 2.0


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied(tmp_path, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / "rot.jpg"
    Image.fromarray(photo(30, 50, seed=3)).save(path, "JPEG", exif=exif.tobytes(), quality=95)
    data = path.read_bytes()
    info = probe(data)
    assert info.orientation == orientation
    out = decode(data, info)
    expected = reference(path)
    assert out.shape == expected.shape == ((50, 30, 3) if orientation >= 5 else (30, 50, 3))
    assert (info.height, info.width) == expected.shape[:2]
    assert np.array_equal(out, expected)


def test_reduced_scale_decode_covers_the_request(tmp_path):
    path = save(tmp_path / "big.jpg", photo(400, 600), quality=90)
    data = path.read_bytes()
    info = probe(data)
    small = decode(data, info, 100, 150)
    assert small.shape == (100, 150, 3)  # 1/4 scale, exactly the request
    larger = decode(data, info, 101, 150)
    assert larger.shape[0] >= 101 and larger.shape[1] >= 150 and larger.shape[0] < 400  # the next scale up
    full = decode(data, info)
    ref = np.asarray(Image.fromarray(full).resize((150, 100), Image.BILINEAR))
    assert np.abs(small.astype(int) - ref.astype(int)).mean() < 6


@pytest.mark.parametrize("kind", ["truncated", "corrupt", "text", "empty"])
def test_bad_bytes_raise_image_error(tmp_path, kind):
    path = corrupt_files(tmp_path)[kind]
    with pytest.raises(ImageError):
        data = read_file(path)
        decode(data, probe(data))


def test_empty_file_error_names_the_file(tmp_path):
    path = corrupt_files(tmp_path)["empty"]
    with pytest.raises(ImageError, match="empty") as info:
        read_file(path)
    assert info.value.path == str(path)


def test_enormous_image_is_refused_before_decoding(tmp_path):
    path = save(tmp_path / "wide.png", photo(20, 300))
    with pytest.raises(ImageError, match="enormous"):
        probe(path.read_bytes(), max_pixels=5000)
    assert probe(path.read_bytes(), max_pixels=6000).width == 300


def test_image_error_where_names_file_and_row():
    err = ImageError("corrupt").where("a/b.jpg", 7)
    assert "a/b.jpg" in str(err) and "row 7" in str(err) and err.reason == "corrupt"
    assert isinstance(err, ValueError)


def test_png_with_jpeg_name_is_read(tmp_path):
    buf = io.BytesIO()
    Image.fromarray(photo(10, 12)).save(buf, "PNG")
    (tmp_path / "mislabeled.jpg").write_bytes(buf.getvalue())
    data = read_file(tmp_path / "mislabeled.jpg")
    assert decode(data, probe(data)).shape == (10, 12, 3)


def _png16_rgb(values: np.ndarray) -> bytes:
    """A 16-bit RGB PNG (colour type 2) whose three channels all hold ``values``, written by hand:
    Pillow cannot write one."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    h, w = values.shape
    rgb = np.repeat(values.astype(">u2")[:, :, None], 3, axis=2)
    raw = b"".join(b"\x00" + row.tobytes() for row in rgb)
    header = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def test_16_bit_grayscale_png_is_scaled_like_16_bit_rgb(tmp_path):
    # every 16-bit value 0..65535 once: the old decode clipped them to 0 and 255 (99.6 % came out 255)
    values = np.arange(65536, dtype=np.uint16).reshape(256, 256)
    Image.fromarray(values).save(tmp_path / "gray16.png")  # mode "I;16"
    data = read_file(tmp_path / "gray16.png")
    with Image.open(tmp_path / "gray16.png") as im:
        assert im.mode.startswith("I")  # Pillow really wrote and reads a 16-bit grayscale PNG
    got = decode(data, probe(data))
    expected = (values >> 8).astype(np.uint8)  # the high byte, no rounding
    assert got.shape == (256, 256, 3) and got.dtype == np.uint8
    for channel in range(3):
        np.testing.assert_array_equal(got[:, :, channel], expected)
    # the same rule as Pillow's own 16-bit RGB path: one pixel row of both agrees exactly
    rgb = _png16_rgb(values[:1])
    np.testing.assert_array_equal(decode(rgb, probe(rgb))[0], got[0])


@pytest.mark.parametrize(
    "mode,options,walked",
    [
        ("RGB", {}, True),
        ("L", {}, True),
        ("RGB", {"progressive": True}, True),
        ("RGB", {"subsampling": 0}, True),
        ("CMYK", {}, False),  # four components: libjpeg-turbo's header says CMYK, Pillow decodes it
    ],
)
def test_a_jpeg_header_is_read_without_libjpeg_where_the_walk_vouches_for_it(
    tmp_path, monkeypatch, mode, options, walked
):
    """The size comes from the start-of-frame segment, read in Python (simplejpeg's header call releases
    and retakes the GIL); it agrees with simplejpeg. Old code called simplejpeg for every JPEG."""
    import simplejpeg

    path = tmp_path / "x.jpg"
    Image.fromarray(photo(37, 61)).convert(mode).save(path, "JPEG", **options)
    data = path.read_bytes()
    expected = probe(data)
    assert (expected.height, expected.width) == (37, 61)
    if mode != "CMYK":
        assert simplejpeg.decode_jpeg_header(data)[:2] == (37, 61)
    calls = []
    real = simplejpeg.decode_jpeg_header
    monkeypatch.setattr(simplejpeg, "decode_jpeg_header", lambda d: calls.append(1) or real(d))
    assert probe(data) == expected and expected.jpeg == walked
    assert calls == ([] if walked else [1])


def test_a_truncated_or_garbled_jpeg_header_is_still_refused_in_the_probe():
    data = save_bytes(photo(20, 30))
    sof = data.index(b"\xff\xc0")
    with pytest.raises(ImageError, match="not a decodable JPEG"):
        probe(data[: sof + 6])  # cut inside the frame header
    with pytest.raises(ImageError, match="not a decodable JPEG"):
        probe(data[:sof] + b"\x00\x00" + data[sof + 2 :])  # the marker garbled


def save_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG")
    return buf.getvalue()
