"""One image's pixels: decode at the right scale, crop the planned box, resample, flip, write.

The resample is torch's uint8 antialiased interpolation on a channels-last crop (the path
torchvision's v2 transforms use), close in value to Pillow's resize; it runs without the GIL.
The result is written straight into the batch buffer row, CHW or HWC.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from stoker.vision.decode import Probe, decode
from stoker.vision.transforms import View


def decode_floor(info: Probe, view: View, reduce: bool = True) -> tuple[int, int]:
    """The smallest decoded (height, width) at 1/2, 1/4 or 1/8 scale that keeps the box at least
    as large as the output; (0, 0) for full size."""
    if not reduce:
        return 0, 0
    box_h, box_w = view.bottom - view.top, view.right - view.left
    need_h = math.ceil(view.height * info.height / max(box_h, 1e-6))
    need_w = math.ceil(view.width * info.width / max(box_w, 1e-6))
    # Only 1/2, 1/4, 1/8: libjpeg-turbo's other scales (3/8, 5/8, ...) decode slower than full size.
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


def resample(crop_hwc: np.ndarray, view: View, interpolation: str, out: torch.Tensor, channels_first: bool) -> None:
    """Resize a ``(h, w, 3)`` uint8 crop to the view's size, flip if asked, and write it into ``out``."""
    src = torch.from_numpy(np.ascontiguousarray(crop_hwc)).permute(2, 0, 1).unsqueeze(0)  # channels-last NCHW
    if src.shape[2:] != (view.height, view.width):
        antialias = interpolation != "nearest"
        src = F.interpolate(
            src,
            size=(view.height, view.width),
            mode=interpolation,
            antialias=antialias,
            align_corners=None if interpolation == "nearest" else False,
        )
    img = src[0]
    if view.flip:
        img = img.flip(-1)
    out.copy_(img if channels_first else img.permute(1, 2, 0))


def render_bytes(
    data: bytes,
    info: Probe,
    view: View,
    interpolation: str,
    out: torch.Tensor,
    channels_first: bool,
    reduce: bool = True,
) -> None:
    """Decode ``data`` (at reduced scale when it still covers the box) and render the view into ``out``."""
    min_h, min_w = decode_floor(info, view, reduce)
    arr = decode(data, info, min_h, min_w)
    top, bottom, left, right = box_in(arr.shape[0], arr.shape[1], info.height, info.width, view)
    resample(arr[top:bottom, left:right], view, interpolation, out, channels_first)


def render_array(chw: np.ndarray, view: View, interpolation: str, out: torch.Tensor, channels_first: bool) -> None:
    """Render the view of an already decoded ``(3, h, w)`` image (a resized store's row) into ``out``."""
    top, bottom, left, right = box_in(chw.shape[1], chw.shape[2], chw.shape[1], chw.shape[2], view)
    crop = chw[:, top:bottom, left:right]
    if crop.shape[1:] == (view.height, view.width):  # a pure crop: no resample
        img = torch.from_numpy(crop)
        if view.flip:
            img = img.flip(-1)
        out.copy_(img if channels_first else img.permute(1, 2, 0))
        return
    resample(crop.transpose(1, 2, 0), view, interpolation, out, channels_first)


__all__ = ["box_in", "decode_floor", "render_array", "render_bytes", "resample"]
