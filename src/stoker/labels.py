"""The label map a user passes, checked: ``label_names=[...]`` (the position is the id) or
``class_to_idx={name: id}``. Text (``text/labels.py``) and images (``vision/finder.py``) take the
same two keywords, so that a second split numbers its names as the first did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stoker.errors import ConfigError


def label_map(
    label_names: Sequence[str] | None = None, class_to_idx: Mapping[str, int] | None = None
) -> tuple[str, ...] | None:
    """The names in id order from ``label_names`` and/or ``class_to_idx`` (``None``: neither given).

    ``class_to_idx`` must number its names ``0 .. n-1``, each id once; given both, they must agree.
    """
    names: tuple[str, ...] | None = None
    if label_names is not None:
        if isinstance(label_names, (str, bytes)) or not isinstance(label_names, Sequence):
            raise ConfigError(
                f"label_names must be a list of names (the position is the id), not {label_names!r}",
                option="label_names",
            )
        names = tuple(label_names)
        bad = [n for n in names if not isinstance(n, str) or not n]
        if bad or len(set(names)) != len(names) or not names:
            raise ConfigError(
                f"label_names must be distinct, non-empty strings, got {list(names)!r}", option="label_names"
            )
    if class_to_idx is not None:
        if not isinstance(class_to_idx, Mapping):
            raise ConfigError(f"class_to_idx must be a dict of name -> id, not {class_to_idx!r}", option="class_to_idx")
        ids = sorted(class_to_idx.values()) if all(_is_int(v) for v in class_to_idx.values()) else None
        if (
            not class_to_idx
            or ids != list(range(len(class_to_idx)))
            or not all(isinstance(k, str) and k for k in class_to_idx)
        ):
            raise ConfigError(
                f"class_to_idx must map non-empty names to the ids 0..n-1, each id once; got {dict(class_to_idx)!r}",
                option="class_to_idx",
            )
        from_dict = tuple(sorted(class_to_idx, key=lambda k: int(class_to_idx[k])))
        if names is not None and names != from_dict:
            raise ConfigError(
                f"label_names={list(names)!r} and class_to_idx={dict(class_to_idx)!r} number the names differently; "
                "pass one of them",
                option="class_to_idx",
            )
        names = from_dict
    return names


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


__all__ = ["label_map"]
