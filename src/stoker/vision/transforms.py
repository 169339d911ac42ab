"""Image transforms named and parametrized as in ``torchvision.transforms``, run as one resample.

A list such as ``[RandomResizedCrop(224), RandomHorizontalFlip()]`` is not run op by op: each
geometric op only moves a *view* (a box in the source image's pixels, the size the next op sees, a
flip), and after the last op the box says which source pixels make the output, so each image is
decoded once (at reduced scale when the box is much larger than the output), cropped once and
resampled once (``render.py``). What follows the geometric ops (Normalize, ``batch_ops.py``'s ops,
callables) is placed and run by ``augment.py``. Ops draw only through ``rng.random()``: a row's
:class:`~stoker.vision.draws.Draws` (from ``(seed, epoch, row)``, so a row gets the same crop in an
epoch whatever the worker count or a resume), a ``random.Random`` or a numpy Generator.
torchvision itself is never imported; its ``InterpolationMode`` values are accepted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from stoker.errors import ConfigError
from stoker.vision.errors import ImageError

INTERPOLATIONS = ("nearest", "bilinear", "bicubic")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class View(NamedTuple):
    """Where the next op looks: a box in source pixels, the size it has now, and a flip."""

    left: float
    top: float
    right: float
    bottom: float
    height: int
    width: int
    flip: bool = False

    @classmethod
    def full(cls, height: int, width: int) -> View:
        return cls(0.0, 0.0, float(width), float(height), height, width)

    def crop(self, top: int, left: int, height: int, width: int) -> View:
        """Cut ``(top, left, height, width)`` of what this view shows."""
        if self.flip:
            left = self.width - left - width
        sx = (self.right - self.left) / self.width
        sy = (self.bottom - self.top) / self.height
        return View(
            self.left + left * sx,
            self.top + top * sy,
            self.left + (left + width) * sx,
            self.top + (top + height) * sy,
            height,
            width,
            self.flip,
        )

    def resize(self, height: int, width: int) -> View:
        return View(self.left, self.top, self.right, self.bottom, height, width, self.flip)


def _uniform(rng: Any, low: float, high: float) -> float:
    return low + (high - low) * rng.random()


def _below(rng: Any, n: int) -> int:
    """An integer in [0, n), from one ``rng.random()`` draw."""
    return min(int(rng.random() * n), n - 1)


def size_pair(name: str, size: Any) -> tuple[int, int]:
    if isinstance(size, int) and not isinstance(size, bool):
        size = (size, size)
    elif isinstance(size, Sequence) and len(size) == 1:
        size = (size[0], size[0])
    if not (
        isinstance(size, Sequence)
        and len(size) == 2
        and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in size)
    ):
        raise ConfigError(f"{name}: size must be a positive int or (height, width), not {size!r}", option="size")
    return int(size[0]), int(size[1])


def _hw(size: int | tuple[int, int]) -> tuple[int, int]:
    """A crop's ``size`` as (height, width); ``__post_init__`` already made it a pair, this tells the type checker."""
    return size if isinstance(size, tuple) else (size, size)


def _interpolation(name: str, mode: Any) -> str:
    value = getattr(mode, "value", mode)  # torchvision.transforms.InterpolationMode -> "bilinear"
    if isinstance(value, str):
        value = {"nearest-exact": "nearest"}.get(value.lower(), value.lower())
    if value not in INTERPOLATIONS:
        raise ConfigError(
            f"{name}: interpolation must be one of {INTERPOLATIONS}, not {mode!r}", option="interpolation"
        )
    return value


@dataclass(frozen=True)
class Resize:
    """Resize: an int sizes the shorter side (keeping the aspect ratio); (h, w) sizes both sides."""

    size: int | tuple[int, int]
    interpolation: Any = "bilinear"
    max_size: int | None = None
    antialias: bool = True
    random = False

    def __post_init__(self) -> None:
        if not (isinstance(self.size, int) and not isinstance(self.size, bool)):
            object.__setattr__(self, "size", size_pair("Resize", self.size))
        elif self.size <= 0:
            raise ConfigError(f"Resize: size must be positive, not {self.size}", option="size")
        object.__setattr__(self, "interpolation", _interpolation("Resize", self.interpolation))

    def out_size(self, size: tuple[int, int] | None) -> tuple[int, int] | None:
        return self.size if isinstance(self.size, tuple) else None

    def apply(self, view: View, rng: Any) -> View:
        if isinstance(self.size, tuple):
            return view.resize(*self.size)
        h, w = view.height, view.width
        short, long = (h, w) if h <= w else (w, h)
        new_short, new_long = self.size, int(self.size * long / short)
        if self.max_size is not None and new_long > self.max_size:
            new_short, new_long = int(self.max_size * new_short / new_long), self.max_size
        return view.resize(new_short, new_long) if h <= w else view.resize(new_long, new_short)


@dataclass(frozen=True)
class _FixedCrop:
    """A crop of a fixed ``size``; subclasses say where (``corner``). No padding: a smaller image is an error."""

    size: int | tuple[int, int]
    random = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", size_pair(type(self).__name__, self.size))

    def out_size(self, size: tuple[int, int] | None) -> tuple[int, int]:
        return _hw(self.size)

    def corner(self, spare_h: int, spare_w: int, rng: Any) -> tuple[int, int]:
        """(top, left) of the crop, given the rows and columns left over around it."""
        raise NotImplementedError(f"{type(self).__name__} must define corner")

    def apply(self, view: View, rng: Any) -> View:
        ch, cw = _hw(self.size)
        _check_fits(view, ch, cw)
        top, left = self.corner(view.height - ch, view.width - cw, rng)
        return view.crop(top, left, ch, cw)


@dataclass(frozen=True)
class CenterCrop(_FixedCrop):
    """Crop the center. An image smaller than the crop is an error (torchvision pads it with black)."""

    def corner(self, spare_h: int, spare_w: int, rng: Any) -> tuple[int, int]:
        return int(round(spare_h / 2.0)), int(round(spare_w / 2.0))


@dataclass(frozen=True)
class RandomCrop(_FixedCrop):
    """Crop at a random place (no padding: an image smaller than the crop is an error)."""

    random = True

    def corner(self, spare_h: int, spare_w: int, rng: Any) -> tuple[int, int]:
        return _below(rng, spare_h + 1), _below(rng, spare_w + 1)


def _check_fits(view: View, ch: int, cw: int) -> None:
    if ch > view.height or cw > view.width:
        raise ImageError(
            f"the image ({view.width}x{view.height} at this point) is smaller than the {cw}x{ch} crop; "
            "put a Resize before the crop, or pass on_error='skip'"
        )


@dataclass(frozen=True)
class RandomResizedCrop:
    """Crop a random area and aspect ratio, then resize to ``size`` (torchvision's algorithm)."""

    size: int | tuple[int, int]
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0)
    interpolation: Any = "bilinear"
    antialias: bool = True
    random = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", size_pair("RandomResizedCrop", self.size))
        object.__setattr__(self, "interpolation", _interpolation("RandomResizedCrop", self.interpolation))
        for name in ("scale", "ratio"):
            lo, hi = getattr(self, name)
            if not (0 < lo <= hi):
                raise ConfigError(
                    f"RandomResizedCrop: {name} must be (low, high) with 0 < low <= high, not {(lo, hi)}", option=name
                )
        if self.scale[1] > 1:
            raise ConfigError(
                f"RandomResizedCrop: scale is a fraction of the area, at most 1, not {self.scale}", option="scale"
            )

    def out_size(self, size: tuple[int, int] | None) -> tuple[int, int]:
        return _hw(self.size)

    def apply(self, view: View, rng: Any) -> View:
        h, w = view.height, view.width
        area = h * w
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * _uniform(rng, self.scale[0], self.scale[1])
            aspect = math.exp(_uniform(rng, *log_ratio))
            cw = int(round(math.sqrt(target * aspect)))
            ch = int(round(math.sqrt(target / aspect)))
            if 0 < cw <= w and 0 < ch <= h:
                top, left = _below(rng, h - ch + 1), _below(rng, w - cw + 1)
                return view.crop(top, left, ch, cw).resize(*_hw(self.size))
        in_ratio = w / h  # fallback: the central crop of the allowed ratio
        if in_ratio < min(self.ratio):
            cw, ch = w, int(round(w / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            ch, cw = h, int(round(h * max(self.ratio)))
        else:
            cw, ch = w, h
        ch, cw = max(ch, 1), max(cw, 1)
        return view.crop((h - ch) // 2, (w - cw) // 2, ch, cw).resize(*_hw(self.size))


@dataclass(frozen=True)
class RandomHorizontalFlip:
    """Mirror left-right with probability ``p``."""

    p: float = 0.5
    random = True

    def __post_init__(self) -> None:
        if not 0 <= self.p <= 1:
            raise ConfigError(f"RandomHorizontalFlip: p must be in [0, 1], not {self.p}", option="p")

    def out_size(self, size: tuple[int, int] | None) -> tuple[int, int] | None:
        return size

    def apply(self, view: View, rng: Any) -> View:
        if rng.random() < self.p:
            return View(view.left, view.top, view.right, view.bottom, view.height, view.width, not view.flip)
        return view


@dataclass(frozen=True)
class Normalize:
    """``(x / 255 - mean) / std`` per channel, run on the device after the copy (see ImageSource)."""

    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    inplace: bool = False

    def __post_init__(self) -> None:
        mean, std = tuple(float(m) for m in self.mean), tuple(float(s) for s in self.std)
        if len(mean) not in (1, 3) or len(std) not in (1, 3) or any(s <= 0 for s in std):
            raise ConfigError(
                f"Normalize: mean and std need 1 or 3 values, std > 0; got {self.mean}, {self.std}", option="std"
            )
        object.__setattr__(self, "mean", mean * (3 // len(mean)))
        object.__setattr__(self, "std", std * (3 // len(std)))


GEOMETRIC = (Resize, CenterCrop, RandomCrop, RandomResizedCrop, RandomHorizontalFlip)


__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "CenterCrop",
    "Normalize",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "Resize",
    "GEOMETRIC",
    "View",
    "size_pair",
]
