"""Sizes given as numbers of bytes or as strings: ``268435456``, ``"256MB"``, ``"1 GiB"`` (binary units),
and sizes said in words for messages (``size_text``)."""

from __future__ import annotations

import re

from stoker.errors import ConfigError

# "", "b" -> 1; "k", "kb", "kib" -> 2**10; ... "t", "tb", "tib" -> 2**40 (lower case)
_UNITS = {"": 1, "b": 1} | {p + s: 2 ** (10 * i) for i, p in enumerate("kmgt", 1) for s in ("", "b", "ib")}


def parse_size(size: int | str, option: str = "shard_size") -> int:
    """``268435456``, ``"256MB"`` or ``"1 GiB"`` -> bytes (binary units); a ConfigError naming ``option`` if not."""
    if isinstance(size, bool):
        raise ConfigError(f"{option} must be a number of bytes or a string like '256MB', not {size!r}", option=option)
    if isinstance(size, int):
        value = size
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(size))
        if not m or m.group(2).lower() not in _UNITS:
            raise ConfigError(f"{option} {size!r} is not a size like 268435456, '256MB' or '1GiB'", option=option)
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise ConfigError(f"{option} must be positive, got {size!r}", option=option)
    return value


def size_text(n: int) -> str:
    """``n`` bytes in words: ``64.0 GiB``."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


__all__ = ["parse_size", "size_text"]
