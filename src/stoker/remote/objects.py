"""Input objects under an object-store URL: listed by prefix or pattern, read by byte ranges, downloaded.

A conversion's input may be objects instead of local files (``stoker.convert.text("s3://bucket/corpus/*.txt",
...)``). :func:`list_objects` names them: every object under a prefix (``s3://bucket/photos/``), those
whose name under the prefix matches a pattern (``s3://bucket/corpus/*.txt``: ``*``, ``?`` and ``[...]``
as :mod:`fnmatch` reads them, ``*`` across ``/`` too), or the one object a URL names
(``s3://bucket/corpus.tsv``). The listing goes through the fetcher of the prefix (``registry.py``: obstore,
else fsspec) and :meth:`Remote.call`, so a missing bucket, refused credentials and a network fault are
short StokerErrors with the client's error behind ``__cause__``; an empty listing is an EmptyDatasetError.

:class:`Objects` is plain data (it travels to Ray workers): each process makes its own fetcher.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stoker.errors import EmptyDatasetError, StoreNotFoundError
from stoker.remote.location import Remote, remote

_PATTERN = set("*?[")


@dataclass(frozen=True)
class Objects:
    """The input objects: ``root`` (a URL prefix), their ``names`` under it (sorted) and ``sizes`` in bytes."""

    url: str  # what the user gave
    root: str
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    storage_options: Mapping[str, Any] | None = field(default=None, repr=False)

    def remote(self) -> Remote:
        """The :class:`Remote` of the prefix (a new client: one per process, made where it is used)."""
        return remote(self.root, self.storage_options)

    def read(self, where: Remote, i: int, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of object ``i`` (``stop`` cut to its size)."""
        name, stop = self.names[i], min(stop, self.sizes[i])
        if stop <= start:
            return b""
        return where.call(f"reading {where.url_of(name)}", lambda: where.fetcher.read_range(name, start, stop))

    def download(self, where: Remote, i: int, directory: Path) -> Path:
        """Object ``i`` as ``directory/<its name>`` (kept when a file of its size is there already)."""
        name = self.names[i]
        local = directory / name
        if local.is_file() and local.stat().st_size == self.sizes[i]:
            return local
        local.parent.mkdir(parents=True, exist_ok=True)
        part = local.with_name(f".{local.name}.part-{os.getpid()}")
        part.open("xb").close()
        try:
            where.call(f"downloading {where.url_of(name)}", lambda: where.fetcher.download(name, part, self.sizes[i]))
            part.replace(local)
        finally:
            part.unlink(missing_ok=True)
        return local


def split_pattern(url: str) -> tuple[str, str | None]:
    """``url`` as (prefix, pattern under it): ``s3://b/c/*.txt`` -> (``s3://b/c``, ``*.txt``); no pattern: (url, None)."""
    scheme, rest = url.split("://", 1)
    cut = next((i for i, ch in enumerate(rest) if ch in _PATTERN), None)
    if cut is None:
        return url.rstrip("/"), None
    slash = rest.rfind("/", 0, cut)
    if slash < 0:
        return url, None  # a pattern in the bucket's name: not ours to expand
    return f"{scheme}://{rest[:slash]}", rest[slash + 1 :]


def list_objects(url: str, storage_options: Mapping[str, Any] | None = None) -> Objects:
    """The objects ``url`` names (see the module docstring), sorted by name; EmptyDatasetError when there are none."""
    root, pattern = split_pattern(os.fspath(url))
    where = remote(root, storage_options)
    found = where.call(f"listing {root}/", where.fetcher.list)
    if pattern is not None:
        found = [(n, s) for n, s in found if fnmatch.fnmatchcase(n, pattern)]
    elif not found and "/" in root.split("://", 1)[1]:  # the URL may name one object
        parent, name = root.rsplit("/", 1)
        above = remote(parent, storage_options)
        try:
            size = above.call(f"reading {root}", lambda: above.fetcher.size(name))
        except StoreNotFoundError:
            pass
        else:
            return Objects(url, parent, (name,), (size,), storage_options)
    if not found:
        what = f"matching {pattern!r} " if pattern else ""
        raise EmptyDatasetError(f"no objects {what}under {root}/: check the URL (nothing to convert)")
    found.sort()
    return Objects(url, root, tuple(n for n, _ in found), tuple(s for _, s in found), storage_options)


__all__ = ["Objects", "list_objects", "split_pattern"]
