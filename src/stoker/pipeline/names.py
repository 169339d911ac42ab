"""``columns=``: which columns to read, and the names they get in a batch.

A list or tuple selects columns and keeps their names; a mapping ``{"train/x": "x"}`` selects
the mapping's keys, in its order, and renames each to its value. Shared by store sources and
``sources.HDF5`` (whose nested keys are ``group/name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stoker.errors import ConfigError

Columns = Sequence[str] | Mapping[str, str]


def column_names(columns: Any, available: Sequence[str], where: str, option: str = "columns") -> dict[str, str]:
    """``{column: name in the batch}`` for ``columns`` (None: every available column, unrenamed).

    Missing columns, names that are not strings, and two columns renamed to one name are a
    ConfigError naming the option, the value and the columns ``where`` has.
    """
    if columns is None:
        return {c: c for c in available}
    if isinstance(columns, Mapping):
        pairs = list(columns.items())
    elif isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence):
        raise ConfigError(
            f"{option} must be a list of column names or a mapping {{column: new name}}, got {columns!r}",
            option=option,
        )
    else:
        pairs = [(c, c) for c in columns]
    if not pairs or any(not isinstance(k, str) or not isinstance(v, str) or not k or not v for k, v in pairs):
        raise ConfigError(
            f"{option} must name columns with non-empty strings, got {columns!r}; the columns of {where} are "
            f"{list(available)}",
            option=option,
        )
    missing = [k for k, _ in pairs if k not in available]
    if missing:
        raise ConfigError(
            f"{where} has no column(s) {missing} (from {option}={columns!r}); its columns are {list(available)}",
            option=option,
        )
    names = dict(pairs)
    outputs = list(names.values())
    twice = sorted({n for n in outputs if outputs.count(n) > 1})
    if isinstance(columns, Mapping) and twice:
        raise ConfigError(f"{option}={columns!r} gives two columns the name {twice[0]!r}", option=option)
    return names


__all__ = ["Columns", "column_names"]
