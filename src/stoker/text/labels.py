"""Labels to numbers, the same way in every file.

Numbers stay numbers (integers ``int64``, floats ``float32``). Names get ids in sorted order
(ImageFolder's rule, so train and validation files number them alike), or from a map the user
passes (``label_names=["neg", "pos"]`` or ``class_to_idx={"neg": 0, "pos": 1}``); a label outside
the map is an :class:`~stoker.errors.InputError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from stoker.errors import InputError
from stoker.labels import label_map


def label_kind(value: Any) -> str:
    """``"int"``, ``"float"`` or ``"name"`` for one raw label (``"3"`` read from a file is an int)."""
    if isinstance(value, bool):
        return "name"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if value is None:
        raise InputError("a label is missing (null); every example needs one, or read no labels (label_column=None)")
    text = str(value).strip()
    if text.lstrip("+-").isdigit():
        return "int"
    return "name"


def kind_of(values: Iterable[Any], where: str) -> str | None:
    """The one kind of ``values`` (ints among floats count as floats); names mixed with numbers are refused."""
    values = values if isinstance(values, (list, tuple)) else list(values)
    types = set(map(type, values))  # plain ints and floats: decided without a call per label
    if types and types <= {int, float}:
        return "float" if float in types else "int"
    kinds = {label_kind(v) for v in (set(values) if types == {str} else values)}  # names: each once
    if "int" in kinds and "float" in kinds:
        kinds.discard("int")
    if len(kinds) > 1:
        raise InputError(f"{where}: labels mix numbers and names ({sorted(kinds)}); use one kind of label")
    return kinds.pop() if kinds else None


def only(values: Iterable[Any], kind: type) -> bool:
    """Whether every value is exactly of type ``kind`` (one C-level pass, no Python call per value)."""
    return set(map(type, values)) <= {kind}


class LabelCoder:
    """Raw labels to numbers with a fixed name map (given, or the sorted names of the whole input).

    Args:
        names: the names in id order, or ``None`` for numeric labels.
        given: whether the map came from the user (then the error names ``label_names``).
        kind: for numeric labels, the kind of the whole input (``"int"`` or ``"float"``, from
            :meth:`fit`): every part is then coded alike (a block of whole numbers among floats gives
            ``float32`` too); ``None``: each call decides from its own values.
    """

    def __init__(self, names: Sequence[str] | None, given: bool = False, kind: str | None = None) -> None:
        self.names = None if names is None else tuple(names)
        self.given = given
        self.kind = kind if names is None else "name"
        self._ids = None if names is None else {n: i for i, n in enumerate(self.names or ())}

    @classmethod
    def fit(cls, values: Iterable[Any], where: str, names: Sequence[str] | None = None) -> LabelCoder:
        """The coder for ``values``: the given ``names``, else the sorted names found, else numbers."""
        if names is not None:
            return cls(names, given=True)
        values = values if isinstance(values, list) else list(values)
        kind = kind_of(values, where)
        if kind == "name":
            return cls(sorted(set(map(str, values))))
        return cls(None, kind=kind)

    def encode(
        self, values: list[Any], lines: Sequence[int] | np.ndarray, where: str, unit: str = "line"
    ) -> np.ndarray:
        """Codes of ``values``; ``lines`` (one per value) name the ``unit`` (line or row) of a label outside the map."""
        if self._ids is None:
            if self.kind == "int" and only(values, int):  # the common case: one C-level pass
                return np.asarray(values, dtype=np.int64)
            kind = kind_of(values, where)
            if kind == "name":
                raise InputError(f"{where}: labels mix numbers and names; use one kind of label")
            if "float" in (kind, self.kind):
                return np.asarray([float(v) for v in values], dtype=np.float32)
            return np.asarray(values if only(values, int) else [int(v) for v in values], dtype=np.int64)
        ids = self._ids
        if only(values, str):  # names read from a file: one lookup each, no loop
            codes = list(map(ids.get, values))
            if None not in codes:
                return np.asarray(codes, dtype=np.int64)
        out = np.empty(len(values), dtype=np.int64)
        for k, v in enumerate(values):
            code = ids.get(str(v))
            if code is None:
                if v is None:
                    label_kind(v)  # raises: a missing label
                rule = "label_names / class_to_idx" if self.given else "the names found in the input"
                raise InputError(
                    f"{where}, {unit} {lines[k]}: label {v!r} is not in {rule} ({list(self.names or ())}); "
                    "add it to the map, or fix the line",
                    path=where if unit == "line" else None,
                    line=lines[k],
                )
            out[k] = code
        return out

    @property
    def label_names(self) -> tuple[str, ...] | None:
        return self.names


__all__ = ["LabelCoder", "kind_of", "label_kind", "label_map", "only"]
