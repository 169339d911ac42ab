"""One image's pixels: decode at the right scale, crop the planned box, resample, flip, write.

The resample is torch's uint8 antialiased interpolation (torchvision v2's kernel, close in value to
Pillow's resize), written straight into the batch row (``out=``), or for a flipped image into a
per-thread scratch row that one numpy copy mirrors into the batch row. A box cut from a resized
image (``Resize`` then ``CenterCrop`` or ``RandomCrop``) is resampled at the whole resize's scale and
then cut, as torchvision does, so eval pixels equal PIL's Resize + CenterCrop of the same decode;
any other box (``RandomResizedCrop``'s) is cut, then resampled. The batch row (``out``) is CHW or
HWC, a torch tensor or a numpy array.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import torch

from stoker.errors import ConfigError
from stoker.vision.decode import Probe, decode
from stoker.vision.transforms import View

# torch's own kernels (those ``F.interpolate`` runs), called with ``out=`` (overloads its type stubs leave out)
_NN: Any = torch._C._nn
_scratch = threading.local()  # per thread: the HWC rows a flipped resample is written into before its mirror copy


def decode_floor(info: Probe, view: View, reduce: bool | None = True) -> tuple[int, int]:
    """The smallest decoded (height, width) at 1/2, 1/4 or 1/8 scale that keeps the box at least
    as large as the output; (0, 0) for full size, and when not ``reduce`` (None: not, as ImageOptions resolves it)."""
    if not reduce:
        return 0, 0
    box_h, box_w = view.bottom - view.top, view.right - view.left
    need_h = math.ceil(view.height * info.height / max(box_h, 1e-6))
    need_w = math.ceil(view.width * info.width / max(box_w, 1e-6))
    # only 1/2, 1/4, 1/8: libjpeg-turbo's other scales decode slower than full size (docs/design-notes.md)
    for factor in (8, 4, 2):
        h, w = -(-info.height // factor), -(-info.width // factor)
        if h >= need_h and w >= need_w:
            return h, w
    return 0, 0


def box_in(arr_h: int, arr_w: int, info_h: int, info_w: int, view: View) -> tuple[int, int, int, int]:
    """The view's box in the pixels of an array decoded at ``arr_h x arr_w``: (top, bottom, left, right)."""
    sy, sx = arr_h / info_h, arr_w / info_w
    top = min(max(int(round(view.top * sy)), 0), arr_h - 1)
    left = min(max(int(round(view.left * sx)), 0), arr_w - 1)
    bottom = min(max(int(round(view.bottom * sy)), top + 1), arr_h)
    right = min(max(int(round(view.right * sx)), left + 1), arr_w)
    return top, bottom, left, right


def _scratch_row(height: int, width: int) -> tuple[torch.Tensor, np.ndarray]:
    """This thread's channels-last ``(1, 3, h, w)`` kernel output and the ``(h, w, 3)`` array over it."""
    rows = getattr(_scratch, "rows", None)
    if rows is None:
        rows = _scratch.rows = {}
    row = rows.get((height, width))
    if row is None:
        hwc = np.empty((height, width, 3), np.uint8)
        row = rows[(height, width)] = (torch.from_numpy(hwc.transpose(2, 0, 1)[None]), hwc)
    return row


def _kernel(interpolation: str) -> Any:
    """torch's resize kernel of ``interpolation``: antialiased for bilinear and bicubic, as torchvision's."""
    if interpolation == "bilinear":
        return _NN._upsample_bilinear2d_aa
    if interpolation == "bicubic":
        return _NN._upsample_bicubic2d_aa
    raise ConfigError(
        f"interpolation must be 'nearest', 'bilinear' or 'bicubic', not {interpolation!r}", option="interpolation"
    )


def _copy_into(dst: np.ndarray, hwc: np.ndarray, flip: bool, channels_first: bool) -> None:
    """One numpy copy of an ``(h, w, 3)`` image into the row ``dst``, mirrored when ``flip``."""
    if channels_first:
        np.copyto(dst, (hwc[:, ::-1] if flip else hwc).transpose(2, 0, 1))
    elif not flip:
        np.copyto(dst, hwc)
    elif dst.strides[1:] == (3, 1) and hwc.strides[2] == 1:  # pixels as 3-byte items: a mirror copy ~2.5x faster
        np.copyto(dst.view("V3")[:, :, 0], hwc.view("V3")[:, ::-1, 0])
    else:
        np.copyto(dst, hwc[:, ::-1])


def resample(
    crop_hwc: np.ndarray,
    view: View,
    interpolation: str,
    out: torch.Tensor | np.ndarray,
    channels_first: bool,
) -> None:
    """Resize a ``(h, w, 3)`` uint8 crop to the view's size, flip if asked, and write it into ``out``.

    ``out`` is the batch row, ``(3, h, w)`` when ``channels_first`` else ``(h, w, 3)``. The kernel writes
    channels-last (its fast layout): straight into an unflipped HWC row, else into this thread's scratch
    row, which one numpy copy mirrors and transposes into ``out``.
    """
    dst = out.numpy() if isinstance(out, torch.Tensor) else out
    height, width = view.height, view.width
    if crop_hwc.shape[0] == height and crop_hwc.shape[1] == width:  # a pure crop: no resample
        _copy_into(dst, crop_hwc, view.flip, channels_first)
        return
    if crop_hwc.strides[0] < 0 or crop_hwc.strides[1] < 0:  # an EXIF-oriented decode: torch takes no negative strides
        crop_hwc = crop_hwc.copy()  # not ascontiguousarray, which keeps a negative stride on a dimension of size 1
    src = torch.from_numpy(crop_hwc.transpose(2, 0, 1)[None])
    direct = not channels_first and not view.flip
    target, scratch = (torch.from_numpy(dst.transpose(2, 0, 1)[None]), dst) if direct else _scratch_row(height, width)
    if interpolation == "nearest":
        _NN.upsample_nearest2d(src, [height, width], None, None, out=target)
    else:
        _kernel(interpolation)(src, [height, width], False, None, None, out=target)
    if not direct:
        _copy_into(dst, scratch, view.flip, channels_first)


def _on_grid(start: float, end: float, size: int) -> tuple[int, float] | None:
    """One axis of a box (array pixels): ``(offset, scale)`` when it is ``size`` output pixels from whole pixel
    ``offset`` on of a resize of the whole axis at ``scale`` array pixels per output pixel (a Resize, then a crop:
    its edge pixels see the pixels around the box, as in torchvision); else None (the box is cut, then resampled)."""
    scale = (end - start) / size
    offset = start / scale
    return (int(round(offset)), scale) if abs(offset - round(offset)) < 1e-4 else None


def _resample_on_grid(
    arr: np.ndarray,
    grid: tuple[tuple[int, float], tuple[int, float]],
    view: View,
    interpolation: str,
    dst: np.ndarray,
    channels_first: bool,
) -> None:
    """Resize, then crop, as torchvision's Resize then CenterCrop (or RandomCrop) do: the kernel runs at the
    whole resize's scale over the array up to the crop's far edge (and its support), into this thread's scratch
    rows, and one numpy copy cuts the crop out of them into ``dst``, mirrored when the view is flipped."""
    (oy, sy), (ox, sx) = grid
    full_h, full_w = oy + view.height, ox + view.width
    reach = 2 if interpolation == "bicubic" else 1  # the kernel's support in output pixels (1 input pixel at least)
    y1 = min(arr.shape[0], math.ceil((full_h + reach) * sy + reach) + 1)
    x1 = min(arr.shape[1], math.ceil((full_w + reach) * sx + reach) + 1)
    src = arr[:y1, :x1]
    if src.strides[0] < 0 or src.strides[1] < 0:  # an EXIF-oriented decode: torch takes no negative strides
        src = src.copy()
    target, hwc = _scratch_row(full_h, full_w)
    _kernel(interpolation)(
        torch.from_numpy(src.transpose(2, 0, 1)[None]), [full_h, full_w], False, 1 / sy, 1 / sx, out=target
    )
    _copy_into(dst, hwc[oy:, ox:], view.flip, channels_first)


def render(
    arr: np.ndarray, info_h: int, info_w: int, view: View, interpolation: str, out: Any, channels_first: bool
) -> None:
    """Render the view of an upright ``(h, w, 3)`` array, decoded from an ``info_h x info_w`` image, into ``out``."""
    sy, sx = arr.shape[0] / info_h, arr.shape[1] / info_w
    rows = _on_grid(view.top * sy, view.bottom * sy, view.height) if interpolation != "nearest" else None
    cols = _on_grid(view.left * sx, view.right * sx, view.width) if rows is not None else None
    if rows is not None and cols is not None:
        dst = out.numpy() if isinstance(out, torch.Tensor) else out
        _resample_on_grid(arr, (rows, cols), view, interpolation, dst, channels_first)
        return
    top, bottom, left, right = box_in(arr.shape[0], arr.shape[1], info_h, info_w, view)
    resample(arr[top:bottom, left:right], view, interpolation, out, channels_first)


def render_bytes(
    data: bytes,
    info: Probe,
    view: View,
    interpolation: str,
    out: torch.Tensor | np.ndarray,
    channels_first: bool,
    reduce: bool | None = False,
) -> None:
    """Decode ``data`` (at reduced scale when it still covers the box and ``reduce``: asked, since the DCT-domain
    scaling changes the pixels) and render the view into ``out``. ``stoker convert images --mode resized`` takes the
    default: its rows are PIL's Resize + CenterCrop."""
    min_h, min_w = decode_floor(info, view, reduce)
    render(decode(data, info, min_h, min_w), info.height, info.width, view, interpolation, out, channels_first)


def render_array(
    chw: np.ndarray, view: View, interpolation: str, out: torch.Tensor | np.ndarray, channels_first: bool
) -> None:
    """Render the view of an already decoded ``(3, h, w)`` image (a resized store's row) into ``out``."""
    render(chw.transpose(1, 2, 0), chw.shape[1], chw.shape[2], view, interpolation, out, channels_first)


__all__ = ["box_in", "decode_floor", "render", "render_array", "render_bytes", "resample"]
