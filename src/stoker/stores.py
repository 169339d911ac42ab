"""The public doors to a store, local or remote: ``stoker.open``, ``write``, ``StoreWriter``, ``merge``.

A path goes to ``stoker.store`` (the local format), a URL (``s3://bucket/prefix``, any scheme
with a fetcher, ``stoker.remote``) to ``stoker.remote``. This module sits above both and is the
only place that chooses between them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError
from stoker.remote.location import remote_kwargs
from stoker.remote.merge import merge_to_url
from stoker.remote.reader import open_store
from stoker.remote.upload import RemoteStoreWriter
from stoker.store.format import Column
from stoker.store.merge import merge as merge_local
from stoker.store.reader import Store
from stoker.store.urls import is_remote
from stoker.store.writer import DEFAULT_SHARD_SIZE, fill
from stoker.store.writer import StoreWriter as LocalStoreWriter

PathLike = str | os.PathLike[str]


def open(  # noqa: A001
    path: PathLike,
    *,
    verify: bool = False,
    cache_dir: PathLike | None = None,
    cache_limit: int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Store:
    """Open the store at ``path``: a local directory, or a URL (``s3://bucket/prefix``, ``gs://``,
    ``az://``, ``https://``, any fsspec URL, any scheme given a fetcher). ``verify=True`` checks every
    shard's checksum first.

    A remote store is read through a local cache: ``cache_dir`` (default ``~/.cache/stoker``; a
    directory per store under it), at most ``cache_limit`` bytes (``"50GB"``, the default) of
    shards, least recently used evicted. ``storage_options`` go to the fetcher (credentials,
    endpoint); without them the client's own places are used (the environment, profiles).
    """
    if is_remote(path):
        return open_store(
            os.fspath(path),
            verify=verify,
            cache_dir=cache_dir,
            cache_limit=cache_limit,
            storage_options=storage_options,
        )
    return Store(path, verify=verify)


def StoreWriter(  # noqa: N802 - called as the class it returns was, before URLs had a writer of their own
    path: PathLike, schema: Mapping[str, Column] | None = None, **options: Any
) -> LocalStoreWriter:
    """A :class:`stoker.store.StoreWriter` for the local directory ``path``, or, for a URL, a
    ``RemoteStoreWriter`` (a subclass: the same methods; ``storage_options=`` too). See the class."""
    if is_remote(path):
        return RemoteStoreWriter(path, schema, **options)
    return LocalStoreWriter(path, schema, **options)


def write(
    path: PathLike,
    data: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    schema: Mapping[str, Column] | None = None,
    *,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    overwrite: bool = False,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``data`` as a store at ``path`` (a directory or a URL) and return the path.

    ``data`` is either a dict of columns (arrays, tensors or lists with rows along the first
    axis; :class:`Ragged` or lists of 1-D arrays for sequences) or any iterable of sample
    dicts, consumed as a stream. ``storage_options`` (credentials, endpoint) are for a URL
    ``path`` only.
    """
    options = remote_kwargs(path, storage_options)
    with StoreWriter(path, schema, shard_size=shard_size, overwrite=overwrite, metadata=metadata, **options) as w:
        fill(w, data)
    return Path(path)


def merge(
    parts: Sequence[PathLike], out: PathLike, *, storage_options: Mapping[str, Any] | None = None, **options: Any
) -> Path:
    """Join the local stores ``parts`` (in this order) into one new store at ``out``; return its path.

    ``out`` is a directory (``stoker.store.merge.merge``: ``overwrite``, ``metadata``, ``verify``) or a URL
    (``stoker.remote.merge.merge_to_url``: the same, and ``storage_options`` as for ``stoker.write``).
    """
    if is_remote(out):
        return merge_to_url(parts, os.fspath(out), storage_options=storage_options, **options)
    if storage_options is not None:
        raise ConfigError(f"storage_options is for a URL out, and {out} is a local path", option="storage_options")
    return merge_local(parts, out, **options)


__all__ = ["StoreWriter", "merge", "open", "write"]
