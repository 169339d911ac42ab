"""Sizes given as numbers of bytes or as strings: ``268435456``, ``"256MB"``, ``"1 GiB"`` (binary units),
and sizes said in words for messages (``size_text``)."""

from __future__ import annotations

import re

from stoker.errors import ConfigError

_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "kib": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "mib": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "gib": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "tib": 2**40,
}


def parse_size(size: int | str) -> int:
    """``268435456``, ``"256MB"`` or ``"1 GiB"`` -> bytes (binary units)."""
    if isinstance(size, bool):
        raise ConfigError(
            f"shard_size must be a number of bytes or a string like '256MB', not {size!r}", option="shard_size"
        )
    if isinstance(size, int):
        value = size
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(size))
        if not m or m.group(2).lower() not in _UNITS:
            raise ConfigError(
                f"shard_size {size!r} is not a size like 268435456, '256MB' or '1GiB'", option="shard_size"
            )
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise ConfigError(f"shard_size must be positive, got {size!r}", option="shard_size")
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
