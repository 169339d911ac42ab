"""Transforms stoker runs on a whole batch on the device: ColorJitter, RandomErasing, MixUp, CutMix.

Named and parametrized as torchvision's (``torchvision.transforms.v2``), written here with torch alone
(torchvision is never imported). Each op works in two halves:

* ``draw`` runs in a worker, on the host, with the batch's random generators: one per row, seeded by
  ``(seed, epoch, row)`` as the crops are, and one per batch. It returns a :class:`Draw`: a float32
  array ``rows`` that travels to the device with the batch (pinned, on the loader's copy stream) and
  plain numbers ``host`` that stay on the host (box corners, group bounds).
* ``apply`` runs in ``finalize`` on the device and transforms the whole batch with those numbers,
  without reading anything back from the device (no synchronization with the training step).

The batch ``apply`` sees is float32 NCHW: pixel values 0..255 before Normalize, normalized values after
it (so RandomErasing's ``value`` is in the scale the image has at its place in the list, as in
torchvision on a uint8 image). MixUp and CutMix mix the labels too: integer labels become soft one-hot
float32 rows of ``num_classes``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from stoker.errors import ConfigError


@dataclass(frozen=True)
class Draw:
    """One op's random numbers for one batch: ``rows`` goes to the device with the batch, ``host`` stays."""

    rows: np.ndarray | None = None
    host: tuple[float, ...] = ()


class BatchOp:
    """A transform run on the whole batch on the device (see the module docstring).

    Attributes:
        per_row: ``draw`` takes one generator per row (else one for the batch).
        pixels: works on pixel values, so it must come before Normalize.
        mixes_labels: changes the labels (needs a labeled source).
    """

    per_row: ClassVar[bool] = True
    pixels: ClassVar[bool] = False
    mixes_labels: ClassVar[bool] = False

    def draw(self, rngs: Sequence[random.Random], height: int, width: int) -> Draw:
        """This op's random numbers for a batch of ``height x width`` images (host, worker)."""
        raise NotImplementedError(f"{type(self).__name__} must define draw")

    def apply(
        self, x: torch.Tensor, labels: torch.Tensor | None, rows: torch.Tensor | None, host: tuple[float, ...]
    ) -> tuple[torch.Tensor, Any]:
        """The batch ``x`` (float32 NCHW) and its labels, transformed with a :class:`Draw`'s numbers
        (``rows`` now on ``x``'s device); on the device, in the consumer."""
        raise NotImplementedError(f"{type(self).__name__} must define apply")

    def check_labels(self, labels: np.ndarray) -> None:
        """Refuse labels this op cannot use (host, worker); ops that leave labels alone take any."""


def _range(name: str, option: str, value: Any, center: float, bound: tuple[float, float]) -> tuple[float, float] | None:
    """torchvision's reading of a jitter amount: ``v`` means ``[center - v, center + v]`` (cut to ``bound``),
    a pair is the range itself; None when the range is the single value ``center`` (no jitter)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ConfigError(f"{name}: {option} must be >= 0 or a (min, max) pair, not {value!r}", option=option)
        lo, hi = max(center - value, bound[0]), center + value
    elif isinstance(value, Sequence) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        lo, hi = float(value[0]), float(value[1])
    else:
        raise ConfigError(f"{name}: {option} must be a number or a (min, max) pair, not {value!r}", option=option)
    if not bound[0] <= lo <= hi <= bound[1]:
        raise ConfigError(
            f"{name}: {option} range ({lo}, {hi}) must satisfy {bound[0]} <= min <= max <= {bound[1]}", option=option
        )
    return None if lo == hi == center else (float(lo), float(hi))


def _given(rows: torch.Tensor | None, op: BatchOp) -> torch.Tensor:
    """The per-row numbers ``op.draw`` made; a batch without them was not drawn for this op."""
    if rows is None:
        raise TypeError(f"{type(op).__name__}.apply needs the rows its draw made, got None")
    return rows


def _gray(x: torch.Tensor) -> torch.Tensor:
    """ITU-R 601-2 luma of an NCHW RGB batch, (N, 1, H, W), as torchvision's rgb_to_grayscale."""
    return (0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)


def _blend(x: torch.Tensor, other: torch.Tensor | float, factor: torch.Tensor) -> torch.Tensor:
    return (factor * x + (1 - factor) * other).clamp_(0, 255)


def _shift_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the hue of pixel values 0..255 by ``shift`` turns (HSV round trip, saturation and value kept)."""
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    value = torch.maximum(torch.maximum(r, g), b)
    chroma = value - torch.minimum(torch.minimum(r, g), b)
    safe = torch.where(chroma > 0, chroma, torch.ones_like(chroma))
    hue = torch.where(value == r, ((g - b) / safe) % 6, torch.where(value == g, (b - r) / safe + 2, (r - g) / safe + 4))
    hue = torch.where(chroma > 0, hue, torch.zeros_like(hue))  # sextants, 0..6
    hue = (hue + 6 * shift.view(-1, 1, 1)) % 6
    # back to RGB: channel n (5, 3, 1 for r, g, b) is value - chroma * clamp(min(k, 4 - k), 0, 1), k = (n + hue) mod 6
    channels = []
    for n in (5.0, 3.0, 1.0):
        k = (n + hue) % 6
        channels.append(value - chroma * torch.clamp(torch.minimum(k, 4 - k), 0, 1))
    return torch.stack(channels, dim=1)


@dataclass(frozen=True)
class ColorJitter(BatchOp):
    """Random brightness, contrast, saturation and hue per image, applied in a random order per image.

    As ``torchvision.transforms.v2.ColorJitter``: ``brightness=b`` draws a factor in ``[max(0, 1 - b), 1 + b]``
    (a pair gives the range), likewise contrast and saturation; ``hue=h`` draws a shift in ``[-h, h]`` turns,
    ``h <= 0.5``. Computed in float and rounded once at the end (torchvision on uint8 truncates after each op).
    """

    brightness: Any = 0
    contrast: Any = 0
    saturation: Any = 0
    hue: Any = 0
    pixels = True
    PARAMS: ClassVar[int] = 8  # the order of the four ops, then their four factors

    def __post_init__(self) -> None:
        for option in ("brightness", "contrast", "saturation"):
            _range("ColorJitter", option, getattr(self, option), 1.0, (0.0, math.inf))
        _range("ColorJitter", "hue", self.hue, 0.0, (-0.5, 0.5))

    @property
    def ranges(self) -> tuple[tuple[float, float] | None, ...]:
        """(brightness, contrast, saturation, hue) ranges; None where that part is off."""
        return (
            _range("ColorJitter", "brightness", self.brightness, 1.0, (0.0, math.inf)),
            _range("ColorJitter", "contrast", self.contrast, 1.0, (0.0, math.inf)),
            _range("ColorJitter", "saturation", self.saturation, 1.0, (0.0, math.inf)),
            _range("ColorJitter", "hue", self.hue, 0.0, (-0.5, 0.5)),
        )

    def draw(self, rngs: Sequence[random.Random], height: int, width: int) -> Draw:
        """Per row an order of the four parts and their factors; rows grouped by order, so that ``apply``
        runs each part once per group on a contiguous slice. ``rows``: (batch row, 4 factors) in group
        order; ``host``: (start, stop, order...) per group."""
        ranges = self.ranges
        orders, factors = [], []
        for rng in rngs:
            order = [0, 1, 2, 3]
            rng.shuffle(order)
            orders.append(tuple(order))
            factors.append(
                [rng.uniform(*r) if r is not None else (0.0 if i == 3 else 1.0) for i, r in enumerate(ranges)]
            )
        grouped = sorted(range(len(rngs)), key=lambda k: orders[k])
        out = np.array([[k, *factors[k]] for k in grouped], dtype=np.float32).reshape(len(rngs), 5)
        host: list[float] = []
        start = 0
        for stop in range(1, len(grouped) + 1):
            if stop == len(grouped) or orders[grouped[stop]] != orders[grouped[start]]:
                host.extend((start, stop, *orders[grouped[start]]))
                start = stop
        return Draw(out, tuple(host))

    def apply(
        self, x: torch.Tensor, labels: torch.Tensor | None, rows: torch.Tensor | None, host: tuple[float, ...]
    ) -> tuple[torch.Tensor, Any]:
        rows = _given(rows, self)
        index = rows[:, 0].long()
        factors = rows[:, 1:].to(x.dtype).view(-1, 4, 1, 1, 1)
        active = {i for i, r in enumerate(self.ranges) if r is not None}
        grouped = x.index_select(0, index)
        for g in range(0, len(host), 6):
            start, stop = int(host[g]), int(host[g + 1])
            part = grouped[start:stop]
            for op in (int(o) for o in host[g + 2 : g + 6]):
                if op in active:
                    part = self._one(op, part, factors[start:stop, op])
            grouped[start:stop] = part
        return x.index_copy(0, index, grouped), labels

    @staticmethod
    def _one(op: int, x: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
        if op == 0:  # brightness: blend with black
            return _blend(x, 0.0, factor)
        if op == 1:  # contrast: blend with the mean gray of the image
            return _blend(x, _gray(x).mean(dim=(1, 2, 3), keepdim=True), factor)
        if op == 2:  # saturation: blend with the gray image
            return _blend(x, _gray(x), factor)
        return _shift_hue(x, factor.flatten())


@dataclass(frozen=True)
class RandomErasing(BatchOp):
    """With probability ``p``, fill one random box of each image with ``value`` (torchvision's algorithm).

    The box covers ``scale`` of the area with aspect ratio in ``ratio`` (10 tries, else nothing is erased).
    ``value`` is one number or one per channel, in the image's scale at this point of the list: pixel
    values 0..255 before Normalize, normalized values after it (torchvision's ``"random"`` is not offered).
    """

    p: float = 0.5
    scale: tuple[float, float] = (0.02, 0.33)
    ratio: tuple[float, float] = (0.3, 3.3)
    value: Any = 0
    inplace: bool = False
    PARAMS: ClassVar[int] = 4  # top, left, height, width (height 0: not erased)

    def __post_init__(self) -> None:
        if not 0 <= self.p <= 1:
            raise ConfigError(f"RandomErasing: p must be in [0, 1], not {self.p!r}", option="p")
        if not 0 <= self.scale[0] <= self.scale[1] <= 1:
            raise ConfigError(f"RandomErasing: scale must be 0 <= min <= max <= 1, not {self.scale!r}", option="scale")
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise ConfigError(f"RandomErasing: ratio must be 0 < min <= max, not {self.ratio!r}", option="ratio")
        values = self.value if isinstance(self.value, (tuple, list)) else (self.value,)
        if len(values) not in (1, 3) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        ):
            raise ConfigError(
                f"RandomErasing: value must be a number or 3 numbers (one per channel), not {self.value!r}",
                option="value",
            )
        object.__setattr__(self, "value", tuple(float(v) for v in values))

    def draw(self, rngs: Sequence[random.Random], height: int, width: int) -> Draw:
        out = np.zeros((len(rngs), self.PARAMS), dtype=np.float32)
        area, log_ratio = height * width, (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for k, rng in enumerate(rngs):
            if rng.random() >= self.p:
                continue
            for _ in range(10):
                target = area * rng.uniform(*self.scale)
                aspect = math.exp(rng.uniform(*log_ratio))
                h, w = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
                if 0 < h < height and 0 < w < width:
                    out[k] = (rng.randrange(height - h + 1), rng.randrange(width - w + 1), h, w)
                    break
        return Draw(out)

    def apply(
        self, x: torch.Tensor, labels: torch.Tensor | None, rows: torch.Tensor | None, host: tuple[float, ...]
    ) -> tuple[torch.Tensor, Any]:
        rows = _given(rows, self)
        top, left, h, w = (rows[:, i].view(-1, 1, 1, 1) for i in range(4))
        ys = torch.arange(x.shape[2], device=x.device, dtype=rows.dtype).view(1, 1, -1, 1)
        xs = torch.arange(x.shape[3], device=x.device, dtype=rows.dtype).view(1, 1, 1, -1)
        box = (ys >= top) & (ys < top + h) & (xs >= left) & (xs < left + w)
        value = torch.full((1, len(self.value), 1, 1), 0.0, dtype=x.dtype, device=x.device)
        for c, v in enumerate(self.value):  # filled on the device: no blocking copy from the host
            value[:, c] = v
        return torch.where(box, value, x), labels


def _soft(labels: torch.Tensor | None, num_classes: int, name: str) -> torch.Tensor:
    """Labels as float32 rows of ``num_classes`` (integer labels one-hot; soft ones as they are)."""
    if labels is None:
        raise ConfigError(f"{name} mixes labels, and this batch has none", option="transforms")
    if labels.dim() == 1:  # checked on the host already (check_labels): no device-side check, no sync
        return torch.zeros(len(labels), num_classes, device=labels.device).scatter_(1, labels.long().view(-1, 1), 1.0)
    return labels.to(torch.float32)


@dataclass(frozen=True)
class _Mix(BatchOp):
    """Shared by MixUp and CutMix: ``alpha`` of the Beta distribution and the ``num_classes`` of the labels."""

    alpha: float = 1.0
    num_classes: int | None = None
    per_row = False
    mixes_labels = True

    def __post_init__(self) -> None:
        name = type(self).__name__
        if not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool) or self.alpha <= 0:
            raise ConfigError(f"{name}: alpha must be a number > 0, not {self.alpha!r}", option="alpha")
        n = self.num_classes
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(
                f"{name}: num_classes must be the number of classes (an integer >= 1), not {n!r}; "
                "the labels become soft one-hot rows of that width",
                option="num_classes",
            )

    def check_labels(self, labels: np.ndarray) -> None:
        """Refuse labels outside ``0..num_classes-1`` (on the host, before the batch leaves the worker)."""
        n = int(self.num_classes or 0)
        if labels.ndim == 1 and len(labels) and (labels.min() < 0 or labels.max() >= n):
            bad = int(labels.max()) if labels.max() >= n else int(labels.min())
            raise ConfigError(
                f"{type(self).__name__}(num_classes={n}) got label {bad}; labels must be in 0..{n - 1}",
                option="num_classes",
            )


@dataclass(frozen=True)
class MixUp(_Mix):
    """Mix each image and its label with the previous one in the batch: one ``lam ~ Beta(alpha, alpha)``
    per batch, ``x = lam * x + (1 - lam) * x.roll(1, 0)``, the same for the one-hot labels (torchvision's)."""

    def draw(self, rngs: Sequence[random.Random], height: int, width: int) -> Draw:
        return Draw(host=(rngs[0].betavariate(self.alpha, self.alpha),))

    def apply(
        self, x: torch.Tensor, labels: torch.Tensor | None, rows: torch.Tensor | None, host: tuple[float, ...]
    ) -> tuple[torch.Tensor, Any]:
        lam = host[0]
        soft = _soft(labels, int(self.num_classes or 0), "MixUp")
        return x * lam + x.roll(1, 0) * (1 - lam), soft * lam + soft.roll(1, 0) * (1 - lam)


@dataclass(frozen=True)
class CutMix(_Mix):
    """Paste one box of the previous image of the batch into each image; labels mixed by the box's area.

    As torchvision's: ``lam ~ Beta(alpha, alpha)``, a box of sides ``sqrt(1 - lam)`` of the image's around
    a random center (cut at the borders), labels weighted ``1 - box area / image area``.
    """

    def draw(self, rngs: Sequence[random.Random], height: int, width: int) -> Draw:
        rng = rngs[0]
        lam = rng.betavariate(self.alpha, self.alpha)
        cy, cx = rng.randrange(height), rng.randrange(width)
        half = 0.5 * math.sqrt(1.0 - lam)
        dh, dw = int(half * height), int(half * width)
        top, bottom = max(cy - dh, 0), min(cy + dh, height)
        left, right = max(cx - dw, 0), min(cx + dw, width)
        kept = 1.0 - (bottom - top) * (right - left) / (height * width)
        return Draw(host=(kept, top, bottom, left, right))

    def apply(
        self, x: torch.Tensor, labels: torch.Tensor | None, rows: torch.Tensor | None, host: tuple[float, ...]
    ) -> tuple[torch.Tensor, Any]:
        kept, top, bottom, left, right = host
        top, bottom, left, right = int(top), int(bottom), int(left), int(right)
        soft = _soft(labels, int(self.num_classes or 0), "CutMix")
        out = x.clone()
        out[:, :, top:bottom, left:right] = x.roll(1, 0)[:, :, top:bottom, left:right]
        return out, soft * kept + soft.roll(1, 0) * (1 - kept)


BATCH_OPS = (ColorJitter, RandomErasing, MixUp, CutMix)

__all__ = ["BATCH_OPS", "BatchOp", "Draw", "ColorJitter", "CutMix", "MixUp", "RandomErasing"]
