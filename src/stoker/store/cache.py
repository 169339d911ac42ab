"""The local cache of a remote store's shards: bounded, least recently used evicted, shared by processes.

One directory per store (``cache_dir/<key>``, the key a hash of the URL and the manifest's
checksum, so that a changed store never reads an old copy) holds ``manifest.json`` and the
shard files under their own names. Processes (ranks on one node) share it:

- ``<shard>.lock``: a file lock per shard. The process that downloads a shard holds it
  exclusively (others wait, then find the shard there: N ranks download it once); a process
  mapping a shard holds it shared for that moment; eviction skips a shard whose lock it cannot
  take at once.
- ``.cache.lock``: held while space is made for a download, so that two processes never count
  the same free bytes.

A download is written to ``<shard>.part-<pid>`` and renamed only once its size and checksum
match the manifest: a partial file never counts as cached. Shards are evicted least recently
used first (by modification time, which every use of a shard sets) until the new one fits in
``limit`` bytes; the cache never holds more, except for shards still mapped by a reader after
their files were deleted (the kernel frees their space when the last map goes).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from stoker.errors import ConfigError, StoreError, StoreWriteError
from stoker.store.sizes import parse_size

DEFAULT_CACHE_LIMIT = 50 * 2**30
CACHE_DIR_ENV = "STOKER_CACHE_DIR"
SPACE_WAIT_S = 60.0  # how long a download waits for other downloads to free the room it needs
_SHARD_FILE = re.compile(r"[^.].*\.arrow(\.part-\d+)?")


def parse_limit(limit: int | str | None) -> int:
    """``cache_limit`` in bytes: an int, ``"50GB"`` (binary units), or None for the default (50 GiB)."""
    if limit is None:
        return DEFAULT_CACHE_LIMIT
    try:
        return parse_size(limit)
    except ConfigError:
        raise ConfigError(
            f"cache_limit={limit!r} is not a size like 53687091200, '50GB' or '500MiB'", option="cache_limit"
        ) from None


def default_root() -> Path:
    """``STOKER_CACHE_DIR``, else ``$XDG_CACHE_HOME/stoker``, else ``~/.cache/stoker`` (read now)."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "stoker"


def cache_key(url: str, manifest_checksum: str) -> str:
    """The name of a store's cache directory: a hash of its URL and its manifest's checksum."""
    return hashlib.sha256(f"{url}\n{manifest_checksum}".encode()).hexdigest()[:32]


class ShardFiles:
    """The cached shard files of one store in ``directory``, at most ``limit`` bytes of them.

    ``mapped`` tells which shards this process maps now (least recently used first), and
    ``unmap`` drops one of them from the reader's maps; both come from the store's ShardCache.
    """

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory = directory
        self.limit = limit
        self.mapped: Callable[[], list[str]] = list
        self.unmap: Callable[[str], None] = lambda name: None
        self.evicted = 0  # shard files this process deleted to make room
        # Room granted by make_room to downloads of this process not yet renamed into place: a
        # download's .part file starts empty and grows, so its size on disk undercounts it.
        self.reserved: dict[str, int] = {}

    def path(self, name: str) -> Path:
        return self.directory / name

    def has(self, name: str, size: int) -> bool:
        """Whether shard ``name`` is cached whole (its size checked; its checksum was, on arrival)."""
        try:
            return os.stat(self.path(name)).st_size == size
        except FileNotFoundError:
            return False

    def touch(self, name: str) -> None:
        """Mark shard ``name`` as just used (eviction takes the least recently used first)."""
        try:
            os.utime(self.path(name))
        except OSError:
            pass

    @contextmanager
    def locked(self, name: str, shared: bool = False) -> Iterator[None]:
        """Hold ``<name>.lock`` (exclusive: downloading; shared: mapping) for the block."""
        fd = self._open_lock(name)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _open_lock(self, name: str) -> int:
        lock = self.path(name + ".lock")
        try:
            return os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, lock) from exc

    def part(self, name: str) -> Path:
        """Where this process downloads shard ``name`` before it is checked."""
        return self.path(f"{name}.part-{os.getpid()}")

    def make_room(self, name: str, size: int) -> None:
        """Evict least recently used shards until ``size`` more bytes fit in ``limit``.

        A shard larger than the whole limit is a StoreError naming cache_dir and the size needed
        at once; room held by downloads and readers still running is waited for, up to
        :data:`SPACE_WAIT_S`, then a StoreError saying the same.
        """
        if size > self.limit:
            raise StoreError(
                f"cache_limit of {_fmt(self.limit)} cannot hold shard {name} ({_fmt(size)}); cache_dir "
                f"{self.directory.parent}: give cache_limit of at least {_fmt(size)} (room for a few shards lets "
                "downloads run ahead of the reader), or write the store with a smaller shard_size",
                path=self.directory,
            )
        deadline = time.monotonic() + SPACE_WAIT_S
        delay = 0.05
        while True:
            fd = os.open(self.directory / ".cache.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if self._evict_until(size):
                    self.reserved[name] = size
                    return
            finally:
                os.close(fd)
            if time.monotonic() > deadline:
                raise StoreError(
                    f"cache_dir {self.directory.parent} is full: cache_limit {_fmt(self.limit)} has no room for shard "
                    f"{name} ({_fmt(size)}) beside the shards being read or downloaded now; raise cache_limit (to "
                    f"at least {_fmt(4 * size)}) or use fewer readers on this cache",
                    path=self.directory,
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _evict_until(self, size: int) -> bool:
        """Delete unused shards, least recently used first, until ``size`` fits; whether it does now."""
        files = []
        reserved = dict(self.reserved)  # a copy: release() may run in another thread
        own_parts = {f"{name}.part-{os.getpid()}" for name in reserved}
        used = sum(reserved.values())
        for entry in os.scandir(self.directory):
            if not _SHARD_FILE.fullmatch(entry.name) or entry.name in own_parts:
                continue  # this process's downloads count at their reserved size
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            used += st.st_size
            if ".part-" not in entry.name:
                files.append((st.st_mtime, entry.name, st.st_size))
        if used + size <= self.limit:
            return True
        mapped = self.mapped()
        rank = {n: i for i, n in enumerate(mapped)}
        # unmapped shards first (oldest first), then shards this process maps but no gather holds
        files.sort(key=lambda f: (f[1] in rank, rank.get(f[1], 0), f[0]))
        for _, victim, nbytes in files:
            if self._evict(victim):
                used -= nbytes
                if used + size <= self.limit:
                    return True
        return False

    def release(self, name: str) -> None:
        """The download of shard ``name`` ended (renamed into place, or failed): its reservation goes."""
        self.reserved.pop(name, None)

    def _evict(self, name: str) -> bool:
        """Delete shard ``name`` unless another process downloads or maps it right now."""
        fd = self._open_lock(name)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            self.unmap(name)  # a gather still holding it keeps its map: the data stays valid until it returns
            try:
                os.unlink(self.path(name))
            except FileNotFoundError:
                return False
            self.evicted += 1
            return True
        finally:
            os.close(fd)


def _fmt(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


__all__ = ["CACHE_DIR_ENV", "DEFAULT_CACHE_LIMIT", "ShardFiles", "cache_key", "default_root", "parse_limit"]
