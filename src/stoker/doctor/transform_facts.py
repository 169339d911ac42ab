"""A script's image transforms as ``stoker.vision`` code, so the doctor's advice keeps what they do.

:func:`vision_code` looks for the transform pipeline a Dataset holds (an attribute ``transform`` or
``transforms``, a torchvision ``Compose`` or a single op) and writes its ops as stoker.vision ops of
the same names and arguments: ``Resize`` (an int sizes the shorter side, ``(h, w)`` squashes),
``CenterCrop``, ``RandomCrop``, ``RandomResizedCrop``, ``RandomHorizontalFlip``, ``Normalize``.
torchvision's dtype conversions (``ToTensor``...) have no counterpart and need none (stoker's batches
are uint8 until ``Normalize`` on the device). An op it cannot write (a padded ``RandomCrop``, a
class of the script's own without the attributes torchvision's has, ``ColorJitter``...) is named in
the note instead: the advice then says in words what its code does differently. Runs in the
script's process, reading attributes only (nothing is called).
"""

from __future__ import annotations

from typing import Any

CONVERSIONS = frozenset(
    {"ToTensor", "PILToTensor", "ToImage", "ToDtype", "ConvertImageDtype", "ToPureTensor", "ToPILImage"}
)
GEOMETRIC = ("Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop", "RandomHorizontalFlip")
_ATTRIBUTES = ("transform", "transforms", "img_transform", "image_transform")


def _size(value: Any) -> str | None:
    """torchvision's ``size`` as stoker's: an int, or ``(h, w)``; a one-item list is an int."""
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return repr(value[0])
        if len(value) == 2:
            return repr(tuple(value))
    return None


def _interpolation(op: Any) -> str:
    mode = getattr(op, "interpolation", "bilinear")
    value = str(getattr(mode, "value", mode)).lower()
    return "" if value in ("bilinear", "2") else f", interpolation={value!r}"


def _op(op: Any) -> str | None:
    """One torchvision op as stoker.vision code, or None when stoker has no op doing the same."""
    name = type(op).__name__
    size = _size(getattr(op, "size", None))
    if name in ("Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop") and size is None:
        return None
    if name == "Resize":
        limit = getattr(op, "max_size", None)
        return f"Resize({size}{_interpolation(op)}{'' if limit is None else f', max_size={limit!r}'})"
    if name == "CenterCrop":
        return f"CenterCrop({size})"
    if name == "RandomCrop":
        padded = getattr(op, "padding", None) or getattr(op, "pad_if_needed", False)
        return None if padded else f"RandomCrop({size})"
    if name == "RandomResizedCrop":
        scale, ratio = tuple(getattr(op, "scale", (0.08, 1.0))), tuple(getattr(op, "ratio", (3 / 4, 4 / 3)))
        extra = "" if scale == (0.08, 1.0) else f", scale={scale!r}"
        extra += "" if tuple(round(r, 6) for r in ratio) == (0.75, 1.333333) else f", ratio={ratio!r}"
        return f"RandomResizedCrop({size}{extra}{_interpolation(op)})"
    if name == "RandomHorizontalFlip":
        p = getattr(op, "p", 0.5)
        return "RandomHorizontalFlip()" if p == 0.5 else f"RandomHorizontalFlip({p!r})"
    if name == "Normalize" and hasattr(op, "mean") and hasattr(op, "std"):
        mean, std = (tuple(float(x) for x in getattr(op, k)) for k in ("mean", "std"))
        return f"Normalize({mean!r}, {std!r})"
    return None


def pipeline(dataset: Any) -> list[Any]:
    """The ops of the first transform attribute of ``dataset`` (a Compose's list, or the one op); [] if none."""
    attrs = getattr(dataset, "__dict__", {})
    for key in _ATTRIBUTES:
        value = attrs.get(key)
        if value is None or isinstance(value, (str, bytes, int, float)):
            continue
        inner = getattr(value, "transforms", None)
        ops = (
            list(inner)
            if isinstance(inner, (list, tuple))
            else list(value)
            if isinstance(value, (list, tuple))
            else [value]
        )
        return [op for op in ops if op is not None]
    return []


def vision_code(dataset: Any) -> tuple[str, str]:
    """``("stoker.vision.Compose([...])", note)``: the Dataset's transforms as stoker.vision ops, and the ops left out.

    The code is ``""`` when no transform was found, or when one of its geometric ops (or one in
    front of them) has no stoker counterpart: the crop would not be the same. The note names what
    was left out (``""`` when nothing was).
    """
    written: list[str] = []
    left: list[str] = []
    geometric_lost = False
    for op in pipeline(dataset):
        name = type(op).__name__
        if name in CONVERSIONS:
            continue
        code = _op(op)
        if code is None:
            left.append(name)
            geometric_lost = geometric_lost or name in GEOMETRIC or not written
        elif left and name in GEOMETRIC:  # stoker plans the crop first: an unknown op cannot run before it
            geometric_lost = True
        else:
            written.append(code)
    if geometric_lost or not any(c.split("(")[0] in GEOMETRIC for c in written):
        return "", ", ".join(left)
    ops = ", ".join("stoker.vision." + c for c in written)
    return f"stoker.vision.Compose([{ops}])", ", ".join(left)
