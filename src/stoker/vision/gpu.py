"""The optional GPU reader: JPEG decoded by nvJPEG (``torchvision.io.decode_jpeg`` on CUDA).

Its host half (``read_batch``, in worker threads, no CUDA needed) reads the JPEG headers and plans
each crop; its device half (``finalize``, on the consumer) decodes the whole batch in one call, cuts
each planned box, resamples it and stacks the batch. :func:`gpu_available` says why it cannot run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from stoker.vision.decode import probe
from stoker.vision.errors import ImageError
from stoker.vision.readers import Encoded, ImageReader, RowErrors, RowRandom
from stoker.vision.render import box_in

if TYPE_CHECKING:
    from stoker.vision.options import ImageOptions


def gpu_available() -> str | None:
    """None when nvJPEG decoding can run here, else the reason it cannot."""
    if not torch.cuda.is_available():
        return "this torch sees no CUDA device"
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except (ImportError, RuntimeError, OSError) as exc:  # a torchvision built for another torch fails to load
        return f"torchvision.io.decode_jpeg cannot be imported ({exc})"
    return None


class GpuDecode(ImageReader):
    """Encoded JPEG -> crop plans on the host (``read_batch``), nvJPEG decode and resample on the device."""

    fills_buffer = False

    def __init__(
        self, encoded: Encoded, options: ImageOptions, size: tuple[int, int], rng: RowRandom, errors: RowErrors
    ) -> None:
        self.encoded, self.options, self.size, self.rng, self.errors = encoded, options, size, rng, errors

    def read_batch(self, idx: np.ndarray, out: np.ndarray | None = None) -> tuple[dict[str, Any], np.ndarray]:
        """``{"jpeg": [bytes], "plan": [(top, bottom, left, right, flip)]}`` for the rows kept (host lists)."""
        opts = self.options
        blobs = self.encoded.fetch(idx)
        jpegs: list[Any] = [None] * len(idx)
        plans: list[Any] = [None] * len(idx)
        draws = self.rng.rows(idx)

        def work(k: int, row: int) -> None:
            data = blobs[k]
            info = probe(data, opts.max_pixels)
            if not info.jpeg or info.orientation != 1:
                raise ImageError(
                    "the GPU path decodes upright RGB JPEG only; convert the images first (stoker convert images)"
                )
            view = opts.transforms.plan(info.height, info.width, None if draws is None else draws[k])
            jpegs[k] = data
            plans[k] = (*box_in(info.height, info.width, info.height, info.width, view), view.flip)

        keep = self.errors.each_row(idx, work)
        kept = np.flatnonzero(keep).tolist()
        return {"jpeg": [jpegs[k] for k in kept], "plan": [plans[k] for k in kept]}, idx[keep]

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Decode the batch's JPEG on the device, cut and resample each planned box, stack as uint8."""
        from torchvision.io import ImageReadMode, decode_jpeg

        opts = self.options
        device = batch["label"].device if "label" in batch else torch.device("cuda")
        datas = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in batch.pop("jpeg")]
        decoded = decode_jpeg(datas, mode=ImageReadMode.RGB, device=device) if datas else []
        h, w = self.size
        out = torch.empty((len(decoded), 3, h, w), dtype=torch.uint8, device=device)
        mode = opts.transforms.interpolation
        for k, (img, (top, bottom, left, right, flip)) in enumerate(zip(decoded, batch.pop("plan"))):
            crop = img[:, top:bottom, left:right].unsqueeze(0).float()
            res = F.interpolate(crop, size=(h, w), mode=mode, antialias=mode != "nearest")[0]
            out[k] = (res.flip(-1) if flip else res).round_().clamp_(0, 255).to(torch.uint8)
        batch["image"] = out if opts.layout == "NCHW" else out.permute(0, 2, 3, 1).contiguous()
        return batch


__all__ = ["GpuDecode", "gpu_available"]
