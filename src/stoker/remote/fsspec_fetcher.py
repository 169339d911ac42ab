"""The fsspec fetcher: every scheme fsspec knows, and the fallback where the registered fetcher declines.

fsspec finds the package of a scheme (s3fs for ``s3://``, gcsfs for ``gs://``, adlfs for
``az://``, aiohttp for ``https://``); a scheme it does not know, or whose package is missing, is a
ConfigError saying what to install. ``storage_options`` are the filesystem's keywords; for
``s3://`` stoker sets connect and read timeouts where they set none, and leaves retries to its
own loop (``Remote.call``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, StoreNotFoundError
from stoker.remote.fetcher import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, Fetcher
from stoker.store.urls import scheme

PIECE = 8 * 2**20  # a download is read from the object and written in pieces of this size


class FsspecFetcher(Fetcher):
    """The objects of one store through an fsspec filesystem ``fs`` under path ``root``."""

    name = "fsspec"

    def __init__(self, fs: Any, root: str) -> None:
        self.fs, self.root = fs, root

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}" if self.root else name

    def read(self, name: str) -> bytes:
        return bytes(self.fs.cat_file(self._path(name)))

    def download(
        self, name: str, local: Path, size: int | None = None, seen: Callable[[memoryview], None] | None = None
    ) -> None:
        """The object streamed into ``local`` (the file the cache made for it, opened never through a link: not
        fsspec's ``get_file``, which opens its target itself), each piece handed to ``seen`` on the way."""
        fd = os.open(local, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            with self.fs.open(self._path(name), "rb") as src:
                while piece := src.read(PIECE):
                    view = memoryview(piece)
                    if seen is not None:
                        seen(view)
                    while view:
                        view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def upload(self, local: Path, name: str) -> None:
        self.fs.put_file(str(local), self._path(name))

    def size(self, name: str) -> int:
        return int(self.fs.info(self._path(name))["size"])

    def exists(self, name: str) -> bool:
        return bool(self.fs.exists(self._path(name)))

    def delete(self, name: str) -> None:
        self.fs.rm_file(self._path(name))

    def list(self) -> list[tuple[str, int]]:
        found = self.fs.find(self.root, detail=True)
        cut = len(self.fs._strip_protocol(self.root).rstrip("/")) + 1
        return [(self.fs._strip_protocol(p)[cut:], int(i["size"])) for p, i in found.items() if i["type"] == "file"]

    def read_range(self, name: str, start: int, stop: int) -> bytes:
        return bytes(self.fs.cat_file(self._path(name), start=start, end=stop))


def _timeouts(protocol: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with stoker's timeouts and retry count added where the user set none (S3 only)."""
    if protocol not in ("s3", "s3a"):
        return options
    out = dict(options)
    config = dict(out.get("config_kwargs") or {})
    config.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
    config.setdefault("read_timeout", READ_TIMEOUT_S)
    config.setdefault("retries", {"max_attempts": 1})  # stoker retries (counted), not botocore
    out["config_kwargs"] = config
    return out


def fsspec_fetcher(url: str, options: Mapping[str, Any]) -> FsspecFetcher:
    """The fsspec fetcher of store ``url`` with stoker's timeouts; ConfigError when fsspec or its package is missing."""
    protocol = str(scheme(url))
    try:
        import fsspec
    except ImportError:
        raise ConfigError(
            f"{url} is an object-store URL; reading and writing those needs fsspec: pip install 'stoker[remote]'",
            option="path",
        ) from None
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ConfigError(
            f"{url}: fsspec knows no filesystem for {protocol}://; use s3://, gs://, az://, https://, memory:// "
            "or a local path",
            option="path",
        ) from None
    except ImportError as exc:
        raise ConfigError(
            f"{url}: {protocol}:// needs a package that is not installed ({exc}); for s3:// "
            "pip install 'stoker[remote]'",
            option="path",
        ) from None
    try:
        fs = cls(skip_instance_cache=True, **_timeouts(protocol, dict(options)))
    except TypeError as exc:
        raise ConfigError(
            f"{url}: storage_options do not fit {cls.__name__} ({str(exc)[:200]})", option="storage_options"
        ) from None
    if hasattr(fs, "retries"):
        fs.retries = 1  # stoker's own retry loop (Remote.call) retries and counts
    root = str(cls._strip_protocol(url)).rstrip("/")
    if not root or root == "/" and protocol != "memory":
        raise StoreNotFoundError(f"{url} names no store: give the bucket and prefix (s3://bucket/prefix)")
    return FsspecFetcher(fs, root)


__all__ = ["FsspecFetcher", "fsspec_fetcher"]
