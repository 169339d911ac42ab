"""The seam through which a store reads shards that do not lie in a directory of its own.

A local store's shard files are in its directory from the start. A store kept elsewhere (an
object store, read by ``stoker.remote``) is built with a :class:`ShardProvider`
(``Store.from_provider``): it holds the manifest and a local directory, brings a shard file into
that directory before the store maps it (:meth:`~ShardProvider.holding`), and may start bringing
the shards of rows about to be read (:meth:`~ShardProvider.prefetch`). The store layer never
imports a provider; ``Store(url)`` is refused: ``stoker.open`` (``stores.py``) sends a URL to
``stoker.remote``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from stoker.store.format import Manifest


class ShardProvider(Protocol):
    """Where the shard files of a store come from, and the local directory they are read in."""

    manifest: Manifest  # checked as a local store's is

    @property
    def url(self) -> str:
        """Where the store lives (its repr and messages name it)."""
        ...

    @property
    def directory(self) -> Path:
        """The local directory shard files are mapped from, once present."""
        ...

    def holding(self, index: int) -> AbstractContextManager[None]:
        """Shard ``index`` present in :attr:`directory` and kept there for the block (the store maps it inside)."""
        ...

    def prefetch(self, shards: list[int]) -> None:
        """Start bringing ``shards`` (in this order) into :attr:`directory`; present ones are skipped."""
        ...

    def attach(self, mapped: Callable[[], list[int]], unmap: Callable[[int], None]) -> None:
        """Learn which shards the store maps now (least recently used first), and how to unmap one."""
        ...

    def verify(self) -> None:
        """Check every shard's bytes against the manifest (a ShardError names a bad one)."""
        ...

    def stats(self) -> dict[str, Any]:
        """What this process did to bring shards (counts for ``Store.remote_stats``)."""
        ...


__all__ = ["ShardProvider"]
