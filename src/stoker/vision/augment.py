"""Where the transforms after the geometric ones run, and running them there.

stoker's leading geometric ops are planned as one crop and resample per image (``transforms.py``,
``render.py``). What follows them in the list runs in its order, at the first place that can run it::

    a callable before any op below      workers, per sample, on each CHW uint8 row of the batch buffer
    ColorJitter, RandomErasing,         device, batched, in finalize; their random numbers are drawn
      MixUp, CutMix (batch_ops.py)        in the worker from (seed, epoch, row) and travel with the batch
    Normalize                           device, batched, in finalize
    a callable after one of those       consumer, per sample, on the device, in finalize
      (or any callable with GPU decode)

``Augment.plan()`` says which, one line per transform. A callable is anything that maps a CHW uint8
tensor (uint8 values before Normalize, normalized float after) to a tensor of the same shape: a
torchvision transform, RandAugment, a function. It draws from its own randomness (torch's global
generator for torchvision), which stoker does not seed per row.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
import torch

from stoker.errors import ConfigError
from stoker.vision.batch_ops import BatchOp, Draw
from stoker.vision.compose import Compose
from stoker.vision.transforms import Normalize

WORKERS = "workers, per sample"
DEVICE = "device, batched (finalize)"
CONSUMER = "consumer, per sample on the device (finalize)"
_KEY = "_augment{}"  # batch entries carrying a batch op's random numbers from the worker to finalize


def _name(op: Any) -> str:
    return getattr(op, "__name__", type(op).__name__)


def _checked(op: Any, out: Any, like: torch.Tensor, normalized: bool) -> torch.Tensor:
    """``out`` when it is a tensor of ``like``'s shape (uint8 before Normalize); else a ConfigError naming ``op``."""
    dtype_ok = isinstance(out, torch.Tensor) and (out.is_floating_point() if normalized else out.dtype == torch.uint8)
    if not dtype_ok or tuple(out.shape) != tuple(like.shape):
        got = f"a {out.dtype} tensor of shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else repr(type(out))
        want = "a float tensor" if normalized else "a uint8 tensor"
        raise ConfigError(
            f"transform {_name(op)} returned {got}; after the crop a transform must return {want} of shape "
            f"{tuple(like.shape)} (the batch's size is set by stoker's geometric transforms)",
            option="transforms",
        )
    return out


class Augment:
    """The transforms after the geometric ones, split into worker and device work; see the module docstring.

    Args:
        transforms: the source's Compose.
        seed: the source's seed; batch ops draw from ``(seed, epoch, row)``.
        layout: ``"NCHW"`` or ``"NHWC"`` of the image batches.
        dtype: the image dtype ``finalize`` returns.
        in_workers: whether the reader fills uint8 rows in the workers (False: GPU decode, callables run in finalize).
        labeled: whether batches carry a ``label`` (MixUp and CutMix need one).
    """

    def __init__(
        self, transforms: Compose, *, seed: int, layout: str, dtype: torch.dtype, in_workers: bool, labeled: bool
    ) -> None:
        after = transforms.after
        lead = 0
        if in_workers:
            while lead < len(after) and not isinstance(after[lead], (BatchOp, Normalize)):
                lead += 1
        self.worker_ops, self.device_ops = after[:lead], after[lead:]
        self.batch_ops = [(k, op) for k, op in enumerate(self.device_ops) if isinstance(op, BatchOp)]
        mixing = next((op for _, op in self.batch_ops if op.mixes_labels), None)
        if mixing is not None and not labeled:
            raise ConfigError(f"{_name(mixing)} mixes labels, and this source has none", option="transforms")
        self.seed, self.layout, self.dtype = seed, layout, dtype
        self._norm: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def plan(self) -> list[str]:
        """``"name -> where it runs"`` for each transform after the geometric ones, in order."""
        lines = [f"{_name(op)} -> {WORKERS}" for op in self.worker_ops]
        for op in self.device_ops:
            where = DEVICE if isinstance(op, (BatchOp, Normalize)) else CONSUMER
            lines.append(f"{_name(op)} -> {where}")
        return lines

    # -- in the workers ----------------------------------------------------------------------
    def run_workers(self, images: np.ndarray) -> None:
        """Run the per-sample callables on each row of the uint8 batch ``images``, in place."""
        if not self.worker_ops:
            return
        rows = torch.from_numpy(images)
        chw = rows if self.layout == "NCHW" else rows.permute(0, 3, 1, 2)
        for k in range(len(chw)):
            x = chw[k]
            for op in self.worker_ops:
                x = _checked(op, op(x), chw[k], normalized=False)
            chw[k].copy_(x)

    def draw(self, batch: dict[str, Any], rows: np.ndarray, epoch: int, size: tuple[int, int]) -> None:
        """Add the batch ops' random numbers for ``rows`` (the batch's rows, sorted) to ``batch``."""
        if not self.batch_ops:
            return
        per_row = [random.Random(f"stoker-augment:{self.seed}:{epoch}:{row}") for row in rows.tolist()]
        digest = hashlib.blake2b(np.ascontiguousarray(rows, dtype=np.int64).tobytes(), digest_size=8).hexdigest()
        per_batch = [random.Random(f"stoker-augment-batch:{self.seed}:{epoch}:{digest}")]
        for k, op in self.batch_ops:
            op.check_labels(np.asarray(batch.get("label", ())))
            drawn = op.draw(per_row if op.per_row else per_batch, *size)
            if drawn.rows is not None:  # a top-level array: the loader copies it with the batch
                batch[_KEY.format(k)] = drawn.rows
            batch[_KEY.format(k) + "_host"] = Draw(host=drawn.host)  # opaque: stays on the host

    # -- on the device, in finalize ------------------------------------------------------------
    def _mean_inv_std(self, norm: Normalize | None, device: torch.device, dtype: torch.dtype, nchw: bool) -> Any:
        """(255 mean, 1 / (255 std)) shaped for NCHW or NHWC; zeros and 1/255 without Normalize."""
        key = (norm, device, dtype, nchw)
        if key not in self._norm:
            mean = torch.tensor(norm.mean if norm else (0.0, 0.0, 0.0), dtype=torch.float32) * 255
            std = torch.tensor(norm.std if norm else (1.0, 1.0, 1.0), dtype=torch.float32) * 255
            shape = (1, 3, 1, 1) if nchw else (1, 1, 1, 3)
            self._norm[key] = (mean.view(shape).to(device, dtype), (1 / std).view(shape).to(device, dtype))
        return self._norm[key]

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The device ops in order, then the image as ``dtype`` (uint8 batches on the device come in)."""
        img = batch["image"]
        if all(isinstance(op, Normalize) for op in self.device_ops):  # the common case: one batch op at most
            if self.dtype != torch.uint8:
                norm = next(iter(self.device_ops), None)
                mean, inv_std = self._mean_inv_std(norm, img.device, self.dtype, self.layout == "NCHW")
                batch["image"] = img.to(self.dtype).sub_(mean).mul_(inv_std)
            return batch
        x = (img if self.layout == "NCHW" else img.permute(0, 3, 1, 2)).to(torch.float32)
        labels = batch.get("label")
        normalized = False
        for k, op in enumerate(self.device_ops):
            if isinstance(op, Normalize):
                mean, inv_std = self._mean_inv_std(op, x.device, torch.float32, True)
                x, normalized = (x - mean) * inv_std, True
            elif isinstance(op, BatchOp):
                key = _KEY.format(k)
                if key + "_host" not in batch:
                    raise ConfigError(
                        f"the batch lost its {key!r} entries ({_name(op)}'s random numbers); a collate_fn over an "
                        "ImageSource must keep the entries it does not know",
                        option="collate_fn",
                    )
                x, labels = op.apply(x, labels, batch.pop(key, None), batch.pop(key + "_host").host)
            else:
                x = self._per_sample(op, x, normalized)
        if not normalized:
            x = x.round_().clamp_(0, 255) if self.dtype == torch.uint8 else x.mul_(1 / 255)
        x = x.to(self.dtype)
        batch["image"] = x if self.layout == "NCHW" else x.permute(0, 2, 3, 1).contiguous()
        if labels is not None:
            batch["label"] = labels
        return batch

    @staticmethod
    def _per_sample(op: Any, x: torch.Tensor, normalized: bool) -> torch.Tensor:
        out = []
        for k in range(len(x)):
            sample = x[k] if normalized else x[k].round().clamp_(0, 255).to(torch.uint8)
            out.append(_checked(op, op(sample), sample, normalized).to(torch.float32))
        return torch.stack(out) if out else x


__all__ = ["CONSUMER", "DEVICE", "WORKERS", "Augment"]
