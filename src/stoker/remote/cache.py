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
  (keyed ``<shard>.part-<pid>``). A download that fits costs no look at the other files; the
  directory is listed, and the total set from it, when a store's cache is opened (:meth:`ShardFiles.sweep`),
  when the file is missing or unreadable, and when a download does not fit and shards must be
  evicted. Each listing sweeps what dead processes left: their ``.part`` files are deleted and
  their reservations dropped, so a killed download never holds room for good.

A download is written to ``<shard>.part-<pid>-<random>`` (made exclusively, never through a link:
``cachedir.py``, which also checks the directories' owner and mode) and renamed only once its size
and checksum match the manifest: a partial file never counts as cached. Shards are evicted least recently
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
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stoker.errors import StoreError, StoreWriteError
from stoker.remote.cachedir import CACHE_DIR_ENV, default_root, new_part, open_lock, writer_pid
from stoker.store.format import ShardInfo
from stoker.store.replace import pid_alive
from stoker.store.shardfile import shard_problem
from stoker.store.sizes import parse_size, size_text

DEFAULT_CACHE_LIMIT = 50 * 2**30
SPACE_WAIT_S = 60.0  # how long a download waits for other downloads to free the room it needs
_SHARD_FILE = re.compile(r"[^.].*\.arrow")
TOTAL_FILE = ".cache.size"


def parse_limit(limit: int | str | None) -> int:
    """``cache_limit`` in bytes: an int, ``"50GB"`` (binary units), or None for the default (50 GiB)."""
    return DEFAULT_CACHE_LIMIT if limit is None else parse_size(limit, option="cache_limit")


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
        self.known: dict[str, tuple[int, int]] = {}  # shard -> (device, inode) of its file checked by this process
        self.first_checks = 0  # cached shards this process did not download, checked at their first map

    def checked(self, name: str) -> None:
        """Shard ``name``'s file as it is now was checked (on arrival): :meth:`first_map` takes it as it is."""
        st = os.lstat(self.path(name))
        self.known[name] = (st.st_dev, st.st_ino)

    def first_map(self, info: ShardInfo) -> str:
        """What is wrong with cached shard ``info`` (:func:`shard_problem`), checked once per file per process.

        The cost is one read of the file, whose pages the map that follows then finds in memory. A
        file is known by its inode: one put there since (a new download, or planted) is checked again.
        """
        path = self.path(info.file)
        st = os.lstat(path)
        if self.known.get(info.file) == (st.st_dev, st.st_ino):
            return ""
        problem = shard_problem(path, info)
        if not problem:
            self.known[info.file] = (st.st_dev, st.st_ino)
            self.first_checks += 1
        return problem

    def path(self, name: str) -> Path:
        return self.directory / name

    def has(self, name: str, size: int) -> bool:
        """Whether shard ``name`` is cached whole: a file (not a link) of ``size`` bytes (its checksum: reader.py)."""
        try:
            st = os.lstat(self.path(name))
        except FileNotFoundError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size == size

    def touch(self, name: str) -> None:
        """Mark shard ``name`` as just used (eviction takes the least recently used first)."""
        try:
            os.utime(self.path(name), follow_symlinks=False)
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
        return open_lock(self.path(name + ".lock"))

    def sweep(self) -> None:
        """Delete the ``.part`` files of dead processes, drop their reservations, and set the total from the directory.

        Run when a store's cache is opened: one listing of its directory.
        """
        with self._bookkeeping(fresh=True):
            pass

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
                f"cache_limit of {size_text(self.limit)} cannot hold shard {name} ({size_text(size)}); cache_dir "
                f"{self.directory.parent}: give cache_limit of at least {size_text(size)} (room for a few shards lets "
                "downloads run ahead of the reader), or write the store with a smaller shard_size",
                path=self.directory,
            )
        deadline = time.monotonic() + SPACE_WAIT_S
        delay = 0.05
        part = _key(name)
        while True:
            with self._bookkeeping() as total:
                if total.used() + size <= self.limit or self._evict_until(total, size):
                    total.reserved[part] = size
                    self.reserved[name] = size
                    return
            if time.monotonic() > deadline:
                raise StoreError(
                    f"cache_dir {self.directory.parent} is full: cache_limit {size_text(self.limit)} has no room for shard "
                    f"{name} ({size_text(size)}) beside the shards being read or downloaded now; raise cache_limit (to "
                    f"at least {size_text(max(4 * size, 2 * self.limit))}) or use fewer readers on this cache",
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
            total.reserved.pop(_key(name), None)
            if self.has(name, size):
                total.cached += size

    def discard(self, name: str, size: int) -> None:
        """Delete cached shard ``name`` (found altered) and take its ``size`` bytes off the running total.

        Under ``<name>.lock`` held exclusively, as a download holds it: no reader maps the file then.
        """
        with self.locked(name):
            if self._delete(name):
                with self._bookkeeping() as total:
                    total.cached = max(0, total.cached - size)

    @contextmanager
    def _bookkeeping(self, fresh: bool = False) -> Iterator[Total]:
        """Hold ``.cache.lock`` and the running total of the cache's bytes for the block; written back after it.

        ``fresh``, or no total to read: the total is taken from a listing of the directory (a sweep).
        """
        fd = self._open_lock(".cache")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            total = Total.load(self.directory / TOTAL_FILE)
            if fresh or total is None:
                # a .part file whose reservation is not known counts at its size on disk
                total, _ = self._listed(total or Total(0, {}))
                self.rescans += 1
            yield total
            total.save(self.directory / TOTAL_FILE)
        finally:
            os.close(fd)

    def _listed(self, last: Total) -> tuple[Total, list[tuple[float, str, int]]]:
        """The total as the directory shows it now, and the cached shards (mtime, name, bytes) it lists.

        Files a dead process was writing (``<name>.part-<pid>...``) are deleted on the way, and its reservations dropped.
        """
        reserved = {part: n for part, n in last.reserved.items() if _alive(part)}
        cached = 0
        files = []
        for entry in os.scandir(self.directory):
            part = writer_pid(entry.name)
            if part is not None and not pid_alive(part[1]):
                (self.directory / entry.name).unlink(missing_ok=True)  # left by a download (or a write) that was killed
                continue
            if part is not None and (part[0] in reserved or not _SHARD_FILE.fullmatch(part[0].rsplit(".part-")[0])):
                continue  # a download running counts at its reserved size; other files written there, nothing
            if part is None and not _SHARD_FILE.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # a link is never a cached shard
            cached += st.st_size
            if part is None:
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
            deleted = self._delete(name)
            self.evicted += deleted
            return deleted
        finally:
            os.close(fd)

    def _delete(self, name: str) -> bool:
        """Unmap and delete shard ``name`` (its lock held); False when it was not there."""
        self.unmap(name)  # a gather still holding it keeps its map: the data stays valid until it returns
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            return False
        return True


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
        tmp = new_part(path.parent, path.name, json.dumps({"cached": self.cached, "reserved": self.reserved}).encode())
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, path) from exc


def _key(name: str) -> str:
    """The key of this process's reservation for a download of shard ``name`` in ``.cache.size``."""
    return f"{name}.part-{os.getpid()}"


def _alive(part: str) -> bool:
    """Whether the process that downloads to ``<shard>.part-<pid>`` still runs."""
    found = writer_pid(part)
    return found is not None and pid_alive(found[1])


__all__ = [
    "CACHE_DIR_ENV",
    "DEFAULT_CACHE_LIMIT",
    "ShardFiles",
    "cache_key",
    "default_root",
    "parse_limit",
]
