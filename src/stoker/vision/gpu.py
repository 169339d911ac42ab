"""The optional GPU path: JPEG decoded by nvJPEG (``torchvision.io.decode_jpeg`` on CUDA) and
cropped/resampled on the GPU.

Worker threads only read the JPEG headers and plan each crop; the consumer's ``finalize``
decodes the whole batch on the device in one call, cuts each planned box, resamples it and
stacks the batch. Needs CUDA and a torchvision built for this torch; without them
``decode_device="cuda"`` is refused with a ConfigError saying so, and nothing else changes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from stoker.errors import ConfigError
from stoker.vision.decode import probe, read_file
from stoker.vision.errors import ImageError
from stoker.vision.render import box_in


def gpu_available() -> str | None:
    """None when nvJPEG decoding can run here, else the reason it cannot."""
    if not torch.cuda.is_available():
        return "this torch sees no CUDA device"
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except (ImportError, RuntimeError, OSError) as exc:  # a torchvision built for another torch fails to load
        return f"torchvision.io.decode_jpeg cannot be imported ({exc})"
    return None


class GpuDecoder:
    """Plans crops in ``read`` (host, worker threads), decodes and resamples in ``finalize`` (device)."""

    def __init__(self, source: Any) -> None:
        reason = gpu_available()
        if reason is not None:
            raise ConfigError(f"decode_device='cuda' needs CUDA and torchvision: {reason}; use decode_device='cpu'", option="decode_device")
        self.source = source

    def read(self, idx: np.ndarray) -> dict[str, Any]:
        src, opts = self.source, self.source.options
        blobs = src.store.gather(idx, [src.image_column])[src.image_column] if src.store is not None else None
        jpegs, plans, kept = [], [], []
        for k, row in enumerate(idx.tolist()):
            try:
                data = blobs[k] if blobs is not None else read_file(src.images.paths[row])
                info = probe(data, opts.max_pixels)
                if not info.jpeg or info.orientation != 1:
                    raise ImageError("the GPU path decodes upright RGB JPEG only; convert the images first (stoker convert images)")
                view = opts.transforms.plan(info.height, info.width, src.rng(row))
            except ImageError as exc:
                if opts.on_error == "raise":
                    raise exc.where(src.describe(row), row) from exc
                continue
            jpegs.append(data)
            plans.append((*box_in(info.height, info.width, info.height, info.width, view), view.flip))
            kept.append(row)
        batch: dict[str, Any] = {"jpeg": jpegs, "plan": plans}  # lists stay on the host
        return src._with_labels(batch, np.asarray(kept, dtype=np.int64))

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        from torchvision.io import ImageReadMode, decode_jpeg

        src, opts = self.source, self.source.options
        device = batch["label"].device if "label" in batch else torch.device("cuda")
        datas = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in batch.pop("jpeg")]
        decoded = decode_jpeg(datas, mode=ImageReadMode.RGB, device=device) if datas else []
        h, w = src.size
        out = torch.empty((len(decoded), 3, h, w), dtype=torch.uint8, device=device)
        mode = opts.transforms.interpolation
        for k, (img, (top, bottom, left, right, flip)) in enumerate(zip(decoded, batch.pop("plan"))):
            crop = img[:, top:bottom, left:right].unsqueeze(0).float()
            res = F.interpolate(crop, size=(h, w), mode=mode, antialias=mode != "nearest")[0]
            out[k] = (res.flip(-1) if flip else res).round_().clamp_(0, 255).to(torch.uint8)
        batch["image"] = out if opts.layout == "NCHW" else out.permute(0, 2, 3, 1).contiguous()
        return batch


__all__ = ["GpuDecoder", "gpu_available"]
