"""``ImageOptions``: how an :class:`~stoker.vision.source.ImageSource` makes its batches.

A module of its own so that the readers (``readers.py``, ``gpu.py``) can name the options
without importing the source that builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from stoker.errors import ConfigError
from stoker.vision.compose import Compose, as_compose
from stoker.vision.decode import DEFAULT_MAX_PIXELS

_DTYPES = {
    "uint8": torch.uint8,
    "float32": torch.float32,
    "float": torch.float32,
    "float16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
}


@dataclass(frozen=True)
class ImageOptions:
    """How an ImageSource makes its batches.

    Attributes:
        transforms: a :class:`~stoker.vision.compose.Compose` (or list): geometric ops that end
            at a fixed size, then any of ColorJitter, RandomErasing, MixUp, CutMix, Normalize and
            callables (``vision/augment.py`` says where each runs).
        layout: ``"NCHW"`` (torch's default) or ``"NHWC"`` for the image batches.
        dtype: the image dtype after ``finalize``: None means float32 when Normalize is given,
            else uint8; a float dtype without Normalize scales to [0, 1].
        seed: base of the per-row randomness: row ``i`` of epoch ``e`` uses ``(seed, e, i)``. None
            (the default): the loader's ``seed``, so one seed decides both the order and the augmentation.
        on_error: ``"raise"`` (an ImageError naming the file) or ``"skip"`` (leave the row out
            of its batch, warn of the first ones by file and list all in :meth:`ImageSource.report`;
            every batch then carries ``index``, the rows it holds).
        max_pixels: images larger than this are refused as enormous.
        reduced_decode: decode JPEG at 1/2, 1/4, 1/8 scale when that still covers the crop. None (the
            default): only for random transforms (training); deterministic ones (``eval_transforms``)
            decode at full size, so their pixels are PIL's Resize + CenterCrop (the DCT-domain scaling
            differs from it by up to ~2.5 levels of 255 on real photos, measured).
        decode_device: ``"cpu"``, or ``"cuda"`` to decode JPEG with nvJPEG
            (``torchvision.io.decode_jpeg``) and resample on the GPU in ``finalize``.
    """

    transforms: Compose = field(default_factory=Compose)
    layout: str = "NCHW"
    dtype: Any = None
    seed: int | None = None
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    reduced_decode: bool | None = None
    decode_device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "transforms", as_compose(self.transforms))
        if self.reduced_decode is None:
            object.__setattr__(self, "reduced_decode", self.transforms.random)
        if self.layout not in ("NCHW", "NHWC"):
            raise ConfigError(f"layout must be 'NCHW' or 'NHWC', not {self.layout!r}", option="layout")
        if self.on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', not {self.on_error!r}", option="on_error")
        dtype = self.dtype
        if isinstance(dtype, str):
            if dtype not in _DTYPES:
                raise ConfigError(
                    f"dtype must be one of {sorted(_DTYPES)} or a torch dtype, not {dtype!r}", option="dtype"
                )
            dtype = _DTYPES[dtype]
        if dtype is None:
            dtype = torch.float32 if self.transforms.normalize is not None else torch.uint8
        if not isinstance(dtype, torch.dtype):
            raise ConfigError(
                f"dtype must be a torch dtype or a name like 'float16', not {self.dtype!r}", option="dtype"
            )
        if self.transforms.normalize is not None and not dtype.is_floating_point:
            raise ConfigError(f"Normalize needs a floating dtype, not {dtype}", option="dtype")
        object.__setattr__(self, "dtype", dtype)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise ConfigError(f"seed must be an integer >= 0 or None, not {self.seed!r}", option="seed")
        if not isinstance(self.max_pixels, int) or self.max_pixels <= 0:
            raise ConfigError(f"max_pixels must be a positive integer, not {self.max_pixels!r}", option="max_pixels")
        if self.decode_device not in ("cpu", "cuda"):
            raise ConfigError(
                f"decode_device must be 'cpu' or 'cuda', not {self.decode_device!r}", option="decode_device"
            )
