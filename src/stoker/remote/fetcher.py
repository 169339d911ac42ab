"""``Fetcher``: what stoker asks of an object store, the one seam between stoker and a storage client.

A fetcher serves the objects of one store, named relative to its root (``manifest.json``,
``shard-00000-....arrow``). Reading a store needs :meth:`~Fetcher.read` and
:meth:`~Fetcher.download`; writing one :meth:`~Fetcher.upload`, :meth:`~Fetcher.size`,
:meth:`~Fetcher.exists` and :meth:`~Fetcher.delete` too; a conversion reading its input from objects
:meth:`~Fetcher.list` and :meth:`~Fetcher.read_range` (``objects.py``). A missing object is
``FileNotFoundError`` and a refused access ``PermissionError``; any other exception is taken for a
network fault and retried (``Remote.call``, ``location.py``): a fetcher does not retry on its own.

A fetcher is made for a store URL by the factory registered for its scheme (``registry.py``:
``register_fetcher(scheme, factory)``); a factory that cannot serve a store's options raises
:class:`Unfit`, and fsspec serves it instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

from stoker.errors import ConfigError

CONNECT_TIMEOUT_S = 10.0  # seconds to open a connection to the object store (where storage_options set none)
READ_TIMEOUT_S = 60.0  # seconds a read may stall before it fails (and is retried)


class Unfit(Exception):
    """A fetcher factory cannot serve this store (its options, its credentials): fsspec is asked instead."""


class Fetcher(ABC):
    """The objects of one store (see the module docstring). ``name`` says which client it is, in stats."""

    name = "fetcher"

    @abstractmethod
    def read(self, name: str) -> bytes:
        """The whole object ``name`` (the manifest)."""

    @abstractmethod
    def download(
        self, name: str, local: Path, size: int | None = None, seen: Callable[[memoryview], None] | None = None
    ) -> None:
        """Object ``name`` into the local file ``local``; each piece of the file handed to ``seen`` in order
        (a checksum taken in the same pass). ``size``: the object's size from the manifest, when known.

        ``local`` already exists: an empty file the cache made (``O_EXCL``, mode 0600, under an
        unguessable name in its 0700 directory). Open it with ``O_WRONLY | O_TRUNC | O_NOFOLLOW`` and
        without ``O_CREAT`` (a fetcher never makes or replaces a file in the cache: a name that is not
        there, or is a link, must fail)."""

    @abstractmethod
    def upload(self, local: Path, name: str) -> None:
        """The local file ``local`` as object ``name`` (replacing one of that name)."""

    @abstractmethod
    def size(self, name: str) -> int:
        """The size of object ``name`` in bytes."""

    def exists(self, name: str) -> bool:
        """Whether object ``name`` exists."""
        try:
            self.size(name)
        except FileNotFoundError:
            return False
        return True

    @abstractmethod
    def delete(self, name: str) -> None:
        """Delete object ``name``."""

    def list(self) -> list[tuple[str, int]]:
        """(name, size) of every object under the root, names relative to it (conversion input)."""
        raise ConfigError(f"the {self.name} fetcher cannot list objects; convert from local files", option="src")

    def read_range(self, name: str, start: int, stop: int) -> bytes:
        """Bytes ``start:stop`` of object ``name`` (fewer at its end)."""
        raise ConfigError(f"the {self.name} fetcher cannot read byte ranges; convert from local files", option="src")


__all__ = ["CONNECT_TIMEOUT_S", "READ_TIMEOUT_S", "Fetcher", "Unfit"]
