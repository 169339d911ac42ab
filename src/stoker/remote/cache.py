"""The local cache of a remote store's shards: bounded, least recently used evicted, shared by processes.

One directory per store (``cache_dir/<key>``, the key a hash of the URL and the manifest's
checksum, so that a changed store never reads an old copy) holds ``manifest.json`` and the
shard files under their own names. Processes (ranks on one node) share it:

- ``<shard>.lock``: a file lock per shard. The process that downloads a shard holds it
  exclusively (others wait, then find the shard there: N ranks download it once); a process
  mapping a shard holds it shared for that moment; eviction skips a shard whose lock it cannot
  take at once.
- ``.cache.lock``: held while space is made for a download, or a download's room given back,
  so that two processes never count the same free bytes.
- ``.cache.size``: the running total the processes agree on (read and rewritten under
  ``.cache.lock``): bytes of shard files, and the room reserved by each download running
  (``<shard>.part-<pid>``). A download that fits costs no look at the other files; the directory
  is listed, and the total set from it, only when the file is missing or unreadable, or when a
  download does not fit and shards must be evicted (a reservation whose process is gone is
  dropped then).

A download is written to ``<shard>.part-<pid>`` and renamed only once its size and checksum
match the manifest: a partial file never counts as cached. Shards are evicted least recently
used first (by modification time, which every use of a shard sets) until the new one fits in
``limit`` bytes; the cache never holds more, except for shards still mapped by a reader after
their files were deleted (the kernel frees their space when the last map goes).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stoker.errors import ConfigError, StoreError, StoreWriteError
from stoker.settings import env as settings_env
from stoker.store.replace import pid_alive
from stoker.store.sizes import parse_size

DEFAULT_CACHE_LIMIT = 50 * 2**30
CACHE_DIR_ENV = "STOKER_CACHE_DIR"
SPACE_WAIT_S = 60.0  # how long a download waits for other downloads to free the room it needs
_SHARD_FILE = re.compile(r"[^.].*\.arrow(\.part-\d+)?")
TOTAL_FILE = ".cache.size"


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
    env = settings_env(CACHE_DIR_ENV)
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
    ``ahead`` holds the shards this process downloaded and has not mapped yet (fetched ahead of
    its reads, by ``RemoteShards``): they are evicted last.
    """

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory = directory
        self.limit = limit
        self.mapped: Callable[[], list[str]] = list
        self.unmap: Callable[[str], None] = lambda name: None
        self.evicted = 0  # shard files this process deleted to make room
        self.rescans = 0  # listings of the directory this process made to set the running total
        # Room granted by make_room to downloads of this process not yet renamed into place: a
        # download's .part file starts empty and grows, so its size on disk undercounts it.
        self.reserved: dict[str, int] = {}
        self.ahead: set[str] = set()

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
        """Evict least recently used shards until ``size`` more bytes fit in ``limit``, and reserve them.

        The running total in ``.cache.size`` says whether they fit without looking at the shard
        files; only when they do not is the directory listed (the total set right from it, LRU
        order taken from it) and shards evicted. A shard larger than the whole limit is a
        StoreError naming cache_dir and the size needed at once; room held by downloads and
        readers still running is waited for, up to :data:`SPACE_WAIT_S`, then a StoreError saying
        the same.
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
        part = self.part(name).name
        while True:
            with self._bookkeeping() as total:
                if total.used() + size <= self.limit or self._evict_until(total, size):
                    total.reserved[part] = size
                    self.reserved[name] = size
                    return
            if time.monotonic() > deadline:
                raise StoreError(
                    f"cache_dir {self.directory.parent} is full: cache_limit {_fmt(self.limit)} has no room for shard "
                    f"{name} ({_fmt(size)}) beside the shards being read or downloaded now; raise cache_limit (to "
                    f"at least {_fmt(4 * size)}) or use fewer readers on this cache",
                    path=self.directory,
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def release(self, name: str) -> None:
        """The download of shard ``name`` ended: its reservation goes, and its bytes count as cached if it arrived.

        Called while this process still holds ``<name>.lock`` exclusively, so the shard file, if
        there, is the one this download renamed into place.
        """
        size = self.reserved.pop(name, None)
        if size is None:
            return
        with self._bookkeeping() as total:
            total.reserved.pop(self.part(name).name, None)
            if self.has(name, size):
                total.cached += size

    def discard(self, name: str, size: int) -> None:
        """Delete cached shard ``name`` (found altered) and take its ``size`` bytes off the running total.

        Under ``<name>.lock`` held exclusively, as a download holds it: no reader maps the file then.
        """
        with self.locked(name):
            self.unmap(name)
            try:
                os.unlink(self.path(name))
            except FileNotFoundError:
                return
            with self._bookkeeping() as total:
                total.cached = max(0, total.cached - size)

    @contextmanager
    def _bookkeeping(self) -> Iterator[Total]:
        """Hold ``.cache.lock`` and the running total of the cache's bytes for the block; written back after it."""
        fd = os.open(self.directory / ".cache.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            total = Total.load(self.directory / TOTAL_FILE)
            if total is None:
                total = self._count()
            yield total
            total.save(self.directory / TOTAL_FILE)
        finally:
            os.close(fd)

    def _count(self) -> Total:
        """The running total taken afresh from the directory (under ``.cache.lock``), there being none to read.

        A ``.part`` file counts at its size on disk then (its reservation was in the lost total).
        """
        total, _ = self._listed(Total(0, {}))
        self.rescans += 1
        return total

    def _listed(self, last: Total) -> tuple[Total, list[tuple[float, str, int]]]:
        """The total as the directory shows it now, and the cached shards (mtime, name, bytes) it lists."""
        reserved = {part: n for part, n in last.reserved.items() if _alive(part)}
        cached = 0
        files = []
        for entry in os.scandir(self.directory):
            if not _SHARD_FILE.fullmatch(entry.name) or entry.name in reserved:
                continue  # a download running counts at its reserved size
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            cached += st.st_size
            if ".part-" not in entry.name:
                files.append((st.st_mtime, entry.name, st.st_size))
        return Total(cached, reserved), files

    def _evict_until(self, total: Total, size: int) -> bool:
        """Delete unused shards, least recently used first, until ``size`` fits; whether it does now.

        ``total`` is set to what the directory shows first (a download that died, a file deleted
        by hand), then kept as shards go.
        """
        fresh, files = self._listed(total)
        self.rescans += 1
        total.cached, total.reserved = fresh.cached, fresh.reserved
        if total.used() + size <= self.limit:
            return True
        mapped = self.mapped()
        rank = {n: i for i, n in enumerate(mapped)}
        ahead = set(self.ahead)
        # shards no reader of this process wants (oldest first), then those it maps but no gather holds (least
        # recently used first), last those it fetched ahead of its reads and has not read yet
        files.sort(key=lambda f: (2 if f[1] in ahead else f[1] in rank, rank.get(f[1], 0), f[0]))
        for _, victim, nbytes in files:
            if self._evict(victim):
                total.cached -= nbytes
                if total.used() + size <= self.limit:
                    return True
        return False

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


@dataclass
class Total:
    """What a cache directory holds: ``cached`` bytes of files, and room ``reserved`` by each running download."""

    cached: int
    reserved: dict[str, int]  # "<shard>.part-<pid>" -> bytes

    def used(self) -> int:
        return self.cached + sum(self.reserved.values())

    @classmethod
    def load(cls, path: Path) -> Total | None:
        """The total written at ``path``, or None when there is none or it cannot be read as one."""
        try:
            obj = json.loads(path.read_bytes())
            cached, reserved = obj["cached"], obj["reserved"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(cached, int) or cached < 0 or not isinstance(reserved, dict):
            return None
        if not all(isinstance(n, int) and n >= 0 for n in reserved.values()):
            return None
        return cls(cached, {str(k): v for k, v in reserved.items()})

    def save(self, path: Path) -> None:
        """Write the total at ``path`` (whole: a reader never sees half of it)."""
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        try:
            tmp.write_text(json.dumps({"cached": self.cached, "reserved": self.reserved}))
            os.replace(tmp, path)
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, path) from exc


def _alive(part: str) -> bool:
    """Whether the process that downloads to ``<shard>.part-<pid>`` still runs."""
    try:
        pid = int(part.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return False
    return pid_alive(pid)


def _fmt(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


__all__ = ["CACHE_DIR_ENV", "DEFAULT_CACHE_LIMIT", "ShardFiles", "cache_key", "default_root", "parse_limit"]
