"""What a store path names: a local directory, or the URL of a store elsewhere (read by ``stoker.remote``).

A string with a scheme (``scheme://...``) is a URL, always: it is never taken for a local
directory (``s3://bucket/store`` once wrote a directory named ``s3:``). ``file://`` URLs are
local paths. The store layer only tells the two apart; reading and writing URLs is
``stoker.remote``'s work.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from stoker.errors import ConfigError

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
_FOLDED = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):/?(?!/)")  # "s3:/bucket/x", what Path makes of s3://
_USUAL_SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "http", "https", "memory", "hf", "oci")


def scheme(path: str | os.PathLike[str]) -> str | None:
    """The URL scheme of ``path`` (``"s3"``), or None for a plain local path.

    ``Path("s3://bucket/x")`` is ``s3:/bucket/x`` (pathlib folds the ``//``): a relative path
    whose first part is a known object-store scheme and a colon is that URL too, so that a URL
    passed through ``Path`` never becomes a local directory named ``s3:``.
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        return None
    m = _SCHEME.match(text)
    if m:
        return m.group("scheme").lower()
    m = _FOLDED.match(text)
    if m and m.group("scheme").lower() in _known_schemes():
        return m.group("scheme").lower()
    return None


def as_url(path: str | os.PathLike[str]) -> str:
    """``path`` as a URL string: ``s3:/bucket/x`` (a URL folded by pathlib) back to ``s3://bucket/x``."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"a store path is a string or a path, not {type(text).__name__}")
    if _SCHEME.match(text):
        return text
    m = _FOLDED.match(text)
    if m is None:
        raise ConfigError(f"{text!r} is not a URL (scheme://...)", option="path")
    return f"{m.group('scheme')}://{text[m.end() :]}"


def _known_schemes() -> set[str]:
    """Object-store schemes a folded path may carry: fsspec's known ones (when installed) and the usual few."""
    names = set(_USUAL_SCHEMES)
    try:
        from fsspec.registry import known_implementations
    except ImportError:
        return names
    return names | {name for name in known_implementations if len(name) > 1}


def is_remote(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a URL that names an object store (any scheme but ``file://``)."""
    s = scheme(path)
    return s is not None and s not in ("file", "local")


def local_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a local Path (a ``file://`` URL loses its scheme); a remote URL is a ConfigError."""
    s = scheme(path)
    if s is None:
        return Path(path)
    if s in ("file", "local"):
        text = os.fspath(path)
        return Path(text[len(s) + 3 :] if text[len(s) :].startswith("://") else text[len(s) + 1 :])
    raise ConfigError(f"{path} is a URL, not a local path", option="path")


__all__ = ["as_url", "is_remote", "local_path", "scheme"]
