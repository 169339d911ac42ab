"""``Compose``: a list of transforms checked once, and the usual training and evaluation recipes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError
from stoker.vision.batch_ops import BATCH_OPS, BatchOp
from stoker.vision.transforms import (
    GEOMETRIC,
    CenterCrop,
    Normalize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
    View,
    size_pair,
)

# torchvision's conversions: stoker's batches are uint8 tensors until finalize, which applies ``dtype``.
CONVERSIONS = ("ToTensor", "PILToTensor", "ToImage", "ToDtype", "ConvertImageDtype", "ToPureTensor", "ToPILImage")


@dataclass(frozen=True)
class Compose:
    """A list of transforms: stoker's geometric ops first (planned as one crop), then anything else.

    After the leading geometric ops may come, in any order: stoker's batch ops (``ColorJitter``,
    ``RandomErasing``, ``MixUp``, ``CutMix``), at most one ``Normalize``, and any callable (a torchvision
    transform, a function) that maps a CHW uint8 tensor to one of the same shape. Where each runs is
    decided by ``vision/augment.py``. Refused with a ConfigError naming the op: a geometric op after a
    non-geometric one, an op that needs pixel values after Normalize, torchvision's dtype conversions,
    and anything that is not callable.
    """

    transforms: tuple[Any, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        ops = tuple(self.transforms)
        object.__setattr__(self, "transforms", ops)
        lead = 0
        while lead < len(ops) and isinstance(ops[lead], GEOMETRIC):
            lead += 1
        modes = [op.interpolation for op in ops[:lead] if hasattr(op, "interpolation")]
        object.__setattr__(self, "_geometric", ops[:lead])
        object.__setattr__(self, "_interpolation", modes[-1] if modes else "bilinear")
        normalized = False
        for op in ops[lead:]:
            name = type(op).__name__
            if isinstance(op, GEOMETRIC):
                raise ConfigError(
                    f"transform {op!r} comes after {ops[lead]!r}: stoker's geometric transforms "
                    f"({', '.join(c.__name__ for c in GEOMETRIC)}) are planned as one crop before anything else "
                    "runs; put them first",
                    option="transforms",
                )
            if isinstance(op, Normalize):
                if normalized:
                    raise ConfigError("transforms hold two Normalize; give one", option="transforms")
                normalized = True
            elif isinstance(op, BatchOp):
                if op.pixels and normalized:
                    raise ConfigError(
                        f"transform {op!r} works on pixel values and comes after Normalize; put it before Normalize",
                        option="transforms",
                    )
            elif name in CONVERSIONS:
                raise ConfigError(
                    f"transform {op!r}: batches are uint8 tensors until the device, where ImageSource's dtype= "
                    "(e.g. dtype='float16') and Normalize convert them; drop it",
                    option="transforms",
                )
            elif not callable(op):
                raise ConfigError(
                    f"transform {op!r} is not callable; use {[c.__name__ for c in (*GEOMETRIC, Normalize)]}, "
                    f"{[c.__name__ for c in BATCH_OPS]} or a callable taking and returning a CHW uint8 tensor",
                    option="transforms",
                )

    @property
    def geometric(self) -> tuple[Any, ...]:
        """The leading geometric ops, planned as one crop and resample per image (found once, in __post_init__)."""
        return self._geometric  # type: ignore[attr-defined]

    @property
    def after(self) -> tuple[Any, ...]:
        """Everything after the geometric ops, in order (Normalize included)."""
        return self.transforms[len(self.geometric) :]

    @property
    def normalize(self) -> Normalize | None:
        return next((op for op in self.transforms if isinstance(op, Normalize)), None)

    @property
    def random(self) -> bool:
        return any(op.random for op in self.geometric)

    @property
    def interpolation(self) -> str:
        """The last geometric op's interpolation ("bilinear" without one); asked once per image."""
        return self._interpolation  # type: ignore[attr-defined]

    def out_size(self, size: tuple[int, int] | None = None) -> tuple[int, int] | None:
        """The output (height, width) for inputs of ``size`` (None: any size); None when it varies."""
        for op in self.geometric:
            size = op.out_size(size)
        return size

    def plan(self, height: int, width: int, rng: Any) -> View:
        """The view of a ``height x width`` image the output shows."""
        view = View.full(height, width)
        for op in self.geometric:
            view = op.apply(view, rng)
        return view


def as_compose(transforms: Any) -> Compose:
    if transforms is None:
        return Compose(())
    if isinstance(transforms, Compose):
        return transforms
    inner = getattr(transforms, "transforms", None)  # a torchvision Compose-like object
    if inner is not None and not isinstance(transforms, (list, tuple)):
        transforms = inner
    if isinstance(transforms, (list, tuple)):
        return Compose(tuple(transforms))
    return Compose((transforms,))


def train_transforms(size: int | tuple[int, int] = 224, *, normalize: bool = True) -> Compose:
    """RandomResizedCrop(size) + RandomHorizontalFlip() (+ ImageNet Normalize): the usual training recipe."""
    ops: list[Any] = [RandomResizedCrop(size), RandomHorizontalFlip()]
    return Compose(tuple(ops + [Normalize()] if normalize else ops))


def eval_transforms(size: int | tuple[int, int] = 224, resize: int | None = None, *, normalize: bool = True) -> Compose:
    """Resize(size * 256 / 224) + CenterCrop(size) (+ ImageNet Normalize): the usual evaluation recipe."""
    crop = size_pair("eval_transforms", size)
    ops: list[Any] = [Resize(resize or int(round(max(crop) * 256 / 224))), CenterCrop(crop)]
    return Compose(tuple(ops + [Normalize()] if normalize else ops))


__all__ = ["CONVERSIONS", "Compose", "as_compose", "eval_transforms", "train_transforms"]
