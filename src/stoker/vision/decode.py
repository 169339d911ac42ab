"""Bytes to upright RGB uint8 arrays, at reduced scale when the target is much smaller.

JPEG goes through libjpeg-turbo (simplejpeg), which releases the GIL and can decode at
1/2, 1/4 or 1/8 scale in the DCT domain: a 500-pixel photo cut to 224 pixels is decoded at
the smallest scale that still covers the crop. Everything else (PNG, WebP, BMP, TIFF, CMYK
JPEG) goes through Pillow. Every image comes out RGB and upright (EXIF orientation applied);
grayscale is repeated over three channels and alpha is dropped, as ``Image.convert("RGB")``.
16-bit samples become 8-bit by keeping their high byte (``value >> 8``): Pillow does so for 16-bit
RGB, and stoker does the same for 16-bit grayscale, which ``convert("RGB")`` would clip.

Every failure is an :class:`~stoker.vision.errors.ImageError` saying what is wrong with the
bytes; the caller adds which file or row they came from.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from stoker.vision.errors import ImageError

DEFAULT_MAX_PIXELS = 2**27  # ~134 Mpx, e.g. 11,585 x 11,585
_JPEG_MAGIC = b"\xff\xd8\xff"
# What Pillow raises on bad input (SyntaxError and EOFError come from some of its plugins).
_PIL_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, TypeError, ZeroDivisionError)


def _simplejpeg():
    try:
        import simplejpeg
    except ImportError as exc:  # pragma: no cover - simplejpeg is in the vision extra
        raise ImportError("stoker.vision decodes JPEG with simplejpeg: pip install 'stoker[vision]'") from exc
    return simplejpeg


def _pil():
    try:
        from PIL import Image, ImageOps
    except ImportError as exc:  # pragma: no cover - pillow is in the vision extra
        raise ImportError("stoker.vision reads PNG/WebP/... with Pillow: pip install 'stoker[vision]'") from exc
    return Image, ImageOps


class Probe(NamedTuple):
    """What the header says: upright size, and which decoder handles the bytes."""

    height: int  # upright (after EXIF orientation)
    width: int
    jpeg: bool  # simplejpeg can decode it straight to RGB
    orientation: int = 1  # EXIF orientation tag (1 = upright)


def read_file(path: str | Path) -> bytes:
    """The bytes of an image file; an ImageError for a missing, unreadable or empty file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read the file ({exc.strerror or exc})", path=path) from exc
    if not data:
        raise ImageError("the file is empty (0 bytes)", path=path)
    return data


def probe(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Probe:
    """Read the header only: size, orientation, decoder. Refuses images over ``max_pixels``."""
    if not data:
        raise ImageError("the image is empty (0 bytes)")
    result = _probe_jpeg(data) if data[:3] == _JPEG_MAGIC else None
    if result is None:
        result = _probe_pil(data)
    if result.height * result.width > max_pixels:
        raise ImageError(
            f"the image is enormous ({result.width}x{result.height} = {result.height * result.width:,} pixels, "
            f"over max_pixels={max_pixels:,}); raise max_pixels if it is wanted, or pass on_error='skip'"
        )
    return result


def _probe_jpeg(data: bytes) -> Probe | None:
    size, orientation = _jpeg_markers(data)
    if size is None:  # a header this walk does not vouch for: libjpeg-turbo reads it
        try:
            h, w, colorspace, _ = _simplejpeg().decode_jpeg_header(data)
        except ValueError as exc:
            raise ImageError(f"not a decodable JPEG ({exc})") from exc
        if colorspace not in ("Gray", "YCbCr", "RGB"):  # CMYK/YCCK: Pillow converts those
            return None
    else:
        h, w = size
    if orientation >= 5:
        h, w = w, h
    return Probe(int(h), int(w), True, orientation)


def _probe_pil(data: bytes) -> Probe:
    Image, _ = _pil()
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            orientation = int(im.getexif().get(0x0112, 1) or 1)
    except Image.DecompressionBombError as exc:
        raise ImageError(f"the image is enormous ({exc})") from exc
    except _PIL_ERRORS as exc:
        raise ImageError(f"not a readable image ({type(exc).__name__}: {exc})") from exc
    if orientation >= 5:
        h, w = w, h
    return Probe(int(h), int(w), False, orientation if 1 <= orientation <= 8 else 1)


def decode(data: bytes, info: Probe, min_height: int = 0, min_width: int = 0) -> np.ndarray:
    """Upright RGB ``(h, w, 3)`` uint8, at the smallest scale with ``h >= min_height`` and ``w >= min_width``.

    ``min_*`` are in upright pixels; 0 (the default) decodes at full size. The result may be
    larger than asked (scales come in eighths) but never smaller, unless the image itself is.
    """
    if info.jpeg:
        return _decode_jpeg(data, info, min_height, min_width)
    return _decode_pil(data, info, min_height, min_width)


def _decode_jpeg(data: bytes, info: Probe, min_height: int, min_width: int) -> np.ndarray:
    if info.orientation >= 5:
        min_height, min_width = min_width, min_height
    try:
        arr = _simplejpeg().decode_jpeg(data, "RGB", min_height=min_height, min_width=min_width, strict=True)
    except ValueError as exc:
        raise ImageError(f"corrupt or truncated JPEG ({exc})") from exc
    return orient(arr, info.orientation)


def _decode_pil(data: bytes, info: Probe, min_height: int, min_width: int) -> np.ndarray:
    Image, _ = _pil()
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.format == "JPEG" and (min_height or min_width):
                want = (min_height, min_width) if info.orientation >= 5 else (min_width, min_height)
                im.draft("RGB", (max(want[0], 1), max(want[1], 1)))  # DCT scaling for CMYK JPEG too
            arr = _sixteen_bit_gray(im)
            if arr is None:
                arr = np.array(im.convert("RGB"))  # a writable copy
    except Image.DecompressionBombError as exc:
        raise ImageError(f"the image is enormous ({exc})") from exc
    except _PIL_ERRORS as exc:
        raise ImageError(f"corrupt, truncated or unsupported image ({type(exc).__name__}: {exc})") from exc
    return orient(arr, info.orientation)


_GRAY16_MODES = ("I;16", "I;16B", "I;16L", "I;16N")


def _sixteen_bit_gray(im: Any) -> np.ndarray | None:
    """A 16-bit grayscale image (mode ``I;16``, or ``I`` for a PNG: older Pillow) as RGB uint8, ``value >> 8``
    as Pillow does to 16-bit RGB (its ``convert("RGB")`` clips gray to 0..255), else None."""
    if im.mode not in _GRAY16_MODES and not (im.mode == "I" and im.format == "PNG"):
        return None
    gray = (np.asarray(im).astype(np.uint32) >> 8).astype(np.uint8)
    return np.repeat(gray[:, :, None], 3, axis=2)


def orient(arr: np.ndarray, orientation: int) -> np.ndarray:
    """Apply an EXIF orientation (1-8) to an ``(h, w, c)`` array, a view: 5-8 transpose, then flip as 1-4 do
    (2 mirrors left-right, 3 turns half way, 4 mirrors top-bottom)."""
    if not 2 <= orientation <= 8:
        return arr
    if orientation >= 5:
        arr, orientation = arr.transpose(1, 0, 2), orientation - 4
    if orientation in (3, 4):
        arr = arr[::-1]
    return arr[:, ::-1] if orientation in (2, 3) else arr


# Start-of-frame markers of 8-bit Huffman JPEG libjpeg-turbo decodes to RGB: baseline, extended, progressive
_HUFFMAN_FRAMES = (0xC0, 0xC1, 0xC2)


def _jpeg_markers(data: bytes) -> tuple[tuple[int, int] | None, int]:
    """One walk over a JPEG's header segments: the stored (height, width) and the EXIF orientation.

    The size is given only for an 8-bit Huffman frame of 1 or 3 components with both sides set
    (what ``simplejpeg.decode_jpeg_header`` would report as Gray, YCbCr or RGB); anything else is
    None and left to libjpeg-turbo. Reading the header here takes no GIL round trip.
    """
    i, n = 2, len(data)
    orientation, size, exif = 1, None, False
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None, orientation
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker == 0xDA or marker == 0xD9:  # start of scan / end of image: no more headers
            return size, orientation
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker == 0xE1 and not exif and data[i + 4 : i + 10] == b"Exif\x00\x00":  # the first EXIF block
            orientation, exif = _tiff_orientation(data[i + 10 : i + 2 + length]), True
        elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            if marker not in _HUFFMAN_FRAMES or i + 10 > n or size is not None:
                return None, orientation
            height, width = int.from_bytes(data[i + 5 : i + 7], "big"), int.from_bytes(data[i + 7 : i + 9], "big")
            if data[i + 4] != 8 or data[i + 9] not in (1, 3) or not height or not width:
                return None, orientation
            size = (height, width)
        i += 2 + length
    return None, orientation  # no start of scan: a truncated header


def _tiff_orientation(tiff: bytes) -> int:
    byte_orders: dict[bytes, Literal["little", "big"]] = {b"II": "little", b"MM": "big"}
    order = byte_orders.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 1
    ifd = int.from_bytes(tiff[4:8], order)
    if ifd + 2 > len(tiff):
        return 1
    for k in range(int.from_bytes(tiff[ifd : ifd + 2], order)):
        entry = ifd + 2 + 12 * k
        if entry + 12 > len(tiff):
            break
        if int.from_bytes(tiff[entry : entry + 2], order) == 0x0112:
            value = int.from_bytes(tiff[entry + 8 : entry + 10], order)
            return value if 1 <= value <= 8 else 1
    return 1


def encode_jpeg(arr: np.ndarray, quality: int = 90) -> bytes:
    """RGB uint8 ``(h, w, 3)`` to baseline JPEG bytes (libjpeg-turbo)."""
    return _simplejpeg().encode_jpeg(
        np.ascontiguousarray(arr), quality=quality, colorspace="RGB", colorsubsampling="420"
    )


__all__ = ["DEFAULT_MAX_PIXELS", "Probe", "decode", "encode_jpeg", "orient", "probe", "read_file"]
