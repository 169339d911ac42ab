"""Reading a store from object storage: the manifest fetched and checked, shards fetched into a local cache.

:func:`open_remote` reads ``URL/manifest.json`` (the same format checks as a local store),
and returns :class:`RemoteShards`, the store's shard provider (``store/provider.py``): the
:class:`~stoker.store.reader.Store` built on it (:func:`open_store`) asks it for a shard before
mapping it (:meth:`RemoteShards.holding`). A shard is downloaded once per cache
(ranks on one node share it through a file lock per shard, ``cache.py``), to a temporary name,
and renamed into the cache only when its size and checksum match the manifest; a mismatch is
fetched once more, then a ShardError naming the URL. :meth:`RemoteShards.prefetch` downloads
the shards of rows about to be read on background threads (at most :data:`FETCH_THREADS`,
started when downloads are queued and ended when the queue is empty, so an opened store keeps
no idle threads), so a batch's read finds its shards there,
and the first batch comes as soon as its own shards have arrived.

Every network call runs through :meth:`Remote.call <stoker.remote.location.Remote.call>`: a
timeout, bounded retries with backoff, each retry counted in :meth:`RemoteShards.stats`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from stoker.errors import ManifestError, ShardError, StokerError, StoreNotFoundError, StoreWriteError
from stoker.remote.cache import ShardFiles, cache_key, parse_limit
from stoker.remote.cachedir import new_part, store_directory
from stoker.remote.location import LOCAL_ERRNOS, Remote, remote
from stoker.store.format import CHECKSUM_KEY, MANIFEST_NAME, Manifest, ShardInfo, _unique_keys
from stoker.store.reader import Store
from stoker.store.shardfile import new_hasher, shard_problem

FETCH_THREADS = 4  # shards downloaded at once by one process


def open_remote(
    url: str,
    cache_dir: str | os.PathLike[str] | None = None,
    cache_limit: int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> RemoteShards:
    """The store at ``url``: its manifest fetched and checked, its cache directory made.

    StoreNotFoundError when ``URL/manifest.json`` does not exist (a missing bucket or prefix,
    or a write that never finished: the manifest is uploaded last), ManifestError when it is
    not a valid manifest, StoreError when access is refused or the store cannot be reached.
    """
    rem = remote(url, storage_options)
    limit = parse_limit(cache_limit)
    manifest_url = rem.url_of(MANIFEST_NAME)
    try:
        raw = rem.call(f"reading {manifest_url}", lambda: rem.fetcher.read(MANIFEST_NAME))
    except FileNotFoundError:
        raise StoreNotFoundError(
            f"no store at {rem.url}: {manifest_url} does not exist; check the bucket and the prefix (a store's "
            "writer uploads its manifest last, so an unfinished write has none: write it again)"
        ) from None
    manifest, checksum = parse_manifest(bytes(raw), manifest_url)
    directory = store_directory(cache_dir, cache_key(rem.url, checksum))
    files = ShardFiles(directory, limit)
    if not files.has(MANIFEST_NAME, len(raw)):  # the local copy a process forked later reopens
        try:
            os.replace(new_part(directory, MANIFEST_NAME, bytes(raw)), directory / MANIFEST_NAME)
        except OSError as exc:
            raise StoreWriteError.from_os_error(exc, directory / MANIFEST_NAME) from exc
    files.sweep()
    return RemoteShards(rem, manifest, files, (cache_dir, cache_limit))


def open_store(
    url: str,
    *,
    verify: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    cache_limit: int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> Store:
    """The :class:`~stoker.store.reader.Store` at ``url``, read through :func:`open_remote`'s cache."""
    return Store.from_provider(open_remote(url, cache_dir, cache_limit, storage_options), verify=verify)


def parse_manifest(raw: bytes, manifest_url: str) -> tuple[Manifest, str]:
    """The manifest in ``raw`` and its checksum (its own, else a sha256 of the bytes), checked as a local one is."""
    where = Path(manifest_url)
    try:
        obj = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys)
        manifest = Manifest.from_json(obj, where)
    except ManifestError as exc:
        raise ManifestError(str(exc).replace(str(where), manifest_url)) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ManifestError(f"{manifest_url} is not valid JSON ({str(exc)[:200]}); the store is corrupt") from None
    own = obj.get(CHECKSUM_KEY)
    checksum = next(iter(own.values())) if isinstance(own, dict) and own else hashlib.sha256(raw).hexdigest()
    return manifest, str(checksum)


class DownloadThreads:
    """Up to ``threads`` daemon threads running queued calls; a thread ends when the queue is empty.

    Unlike a ``ThreadPoolExecutor``, nothing stays alive between bursts of downloads: a store
    that is opened and dropped without a close leaves no threads behind.
    """

    def __init__(self, threads: int, name: str) -> None:
        self._threads = threads
        self._name = name
        self._lock = threading.Lock()
        self._queue: deque[tuple[Future[None], Callable[[], None]]] = deque()
        self._running = 0

    def submit(self, fn: Callable[[], None]) -> Future[None]:
        future: Future[None] = Future()
        with self._lock:
            self._queue.append((future, fn))
            if self._running < self._threads:
                self._running += 1
                threading.Thread(target=self._work, name=f"{self._name}_{self._running}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running -= 1
                    return
                future, fn = self._queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                future.set_exception(exc)
            else:
                future.set_result(None)

    def cancel(self) -> None:
        """Cancel the calls not started yet; running ones finish."""
        with self._lock:
            queued = list(self._queue)
            self._queue.clear()
        for future, _ in queued:
            future.cancel()


class RemoteShards:
    """The shards of one remote store, fetched on demand or ahead into its local cache. Thread-safe.

    A :class:`~stoker.store.provider.ShardProvider`; pickled, it opens its URL again where it is loaded.
    """

    def __init__(
        self, rem: Remote, manifest: Manifest, files: ShardFiles, cache: tuple[Any, Any] = (None, None)
    ) -> None:
        self.remote = rem
        self.manifest = manifest
        self.files = files
        self._cache_args = cache  # (cache_dir, cache_limit) as given to open_remote
        self._lock = threading.Lock()
        self._pending: dict[int, Future[None]] = {}
        self._pool: DownloadThreads | None = None
        self._counts = {"shards_fetched": 0, "bytes_fetched": 0, "cache_hits": 0, "checksum_retries": 0}
        self._fetched_by: dict[str, int] = {}  # shards fetched, by the fetcher that brought them ("obstore", ...)
        self._pid = os.getpid()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (open_remote, (self.remote.url, *self._cache_args, self.remote.storage_options))

    @property
    def cache_limit(self) -> int:
        """The bytes of shards the cache holds at most (the block order fits its window in half)."""
        return int(self.files.limit)

    def attach(self, mapped: Callable[[], list[int]], unmap: Callable[[int], None]) -> None:
        """The store's maps: which shards it maps (least recently used first), and how to unmap one (eviction)."""
        infos = self.manifest.shards
        index = {info.file: i for i, info in enumerate(infos)}
        self.files.mapped = lambda: [infos[i].file for i in mapped()]
        self.files.unmap = lambda name: unmap(index[name])

    def _after_fork(self) -> None:
        """In a process forked from the one that opened the store: a filesystem, lock and threads of its own.

        fsspec's async filesystems (s3fs) refuse to run in a forked child; the parent's threads do not exist here.
        The child downloads through fsspec: obstore's runtime threads do not survive a fork (its calls hang there).
        """
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pending = {}
        self.files.reserved = {}  # the parent's downloads are its own; their .part files are counted on disk
        self.files.ahead = set()
        self._pool = None
        self._counts = dict.fromkeys(self._counts, 0)
        self._fetched_by = {}
        self.remote = remote(self.remote.url, self.remote.storage_options, client="fsspec")

    @property
    def directory(self) -> Path:
        """The local cache directory of this store (``manifest.json`` and the cached shards)."""
        return self.files.directory

    @property
    def url(self) -> str:
        return self.remote.url

    def stats(self) -> dict[str, Any]:
        """What this process fetched: shards and bytes downloaded, cache hits, cached shards checked at first map,
        retries, evictions, cache listings.

        ``fetched_by`` counts the shards fetched by each fetcher (``obstore``, ``fsspec``, ...).
        """
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
            out["fetched_by"] = dict(self._fetched_by)
        out.update(
            url=self.url,
            cache_dir=str(self.directory),
            cache_limit=self.files.limit,
            retries=self.remote.retries,
            client=self.remote.fetcher.name,
            evicted=self.files.evicted,
            cache_checked=self.files.first_checks,
            cache_rescans=self.files.rescans,
            store_bytes=sum(s.bytes for s in self.manifest.shards),
        )
        return out

    # -- reading ----------------------------------------------------------------------------
    @contextmanager
    def holding(self, index: int) -> Iterator[None]:
        """Shard ``index`` in the cache, kept there (shared lock) for the block: map it inside.

        A file this process did not download (another process did, or an earlier run) is checked
        against the manifest's checksum the first time this process maps it (``ShardFiles.first_map``);
        one it downloaded was checked on arrival. A file of the right size with other bytes
        (altered or planted in the cache) is deleted, and a ShardError naming it.
        """
        self._after_fork()
        info = self.manifest.shards[index]
        for _ in range(3):  # evicted by another process between its arrival and this lock: fetch again
            self._wait_or_fetch(index)
            problem = ""
            with self.files.locked(info.file, shared=True):
                if self.files.has(info.file, info.bytes):
                    problem = self.files.first_map(info)
                    if not problem:
                        self.files.touch(info.file)
                        self.files.ahead.discard(info.file)  # read now: evicted like any mapped shard
                        yield
                        return
            if problem:
                self.files.discard(info.file, info.bytes)
                raise ShardError(
                    f"cached shard {self.files.path(info.file)} of {self.remote.url_of(info.file)} has {problem}: "
                    "it was altered in the cache; it is deleted now, read it again to fetch it anew",
                    path=self.files.path(info.file),
                )
        raise ShardError(
            f"shard {self.remote.url_of(info.file)} keeps being evicted from cache_dir {self.directory.parent} "
            f"before it can be read: cache_limit ({self.files.limit} bytes) is too small for the readers sharing it"
        )

    def prefetch(self, shards: Iterable[int]) -> None:
        """Start downloading ``shards`` (in this order) in the background; cached ones are skipped.

        No more than about half the cache limit is queued at once: the rest is fetched when read.
        """
        self._after_fork()
        with self._lock:
            queued = sum(self.manifest.shards[i].bytes for i in self._pending)
            for index in shards:
                info = self.manifest.shards[index]
                if index in self._pending or self.files.has(info.file, info.bytes):
                    continue
                if queued and queued + info.bytes > self.files.limit // 2:
                    break
                if self._pool is None:
                    self._pool = DownloadThreads(FETCH_THREADS, "stoker-fetch")
                self._pending[index] = self._pool.submit(functools.partial(self._fetch, index))
                queued += info.bytes

    def _wait_or_fetch(self, index: int) -> None:
        with self._lock:
            future = self._pending.get(index)
        if future is None:
            self._fetch(index)
            return
        try:
            future.result()
        finally:
            with self._lock:
                if self._pending.get(index) is future:
                    del self._pending[index]

    def _fetch(self, index: int) -> None:
        info = self.manifest.shards[index]
        if self.files.has(info.file, info.bytes):
            self._count("cache_hits")
            return
        with self.files.locked(info.file):  # one process downloads; the others wait and find it there
            if self.files.has(info.file, info.bytes):
                self._count("cache_hits")
                return
            self.files.make_room(info.file, info.bytes)
            try:
                self._download(info)
            finally:
                self.files.release(info.file)

    def _download(self, info: ShardInfo) -> None:
        url = self.remote.url_of(info.file)
        final = self.files.path(info.file)
        problem = ""
        for attempt in range(2):  # a bad arrival is fetched once more
            part = new_part(self.files.directory, info.file)
            try:
                digest, route = self.remote.call(f"downloading {url}", functools.partial(self._arrive, info, part))
            except FileNotFoundError:
                part.unlink(missing_ok=True)
                raise ShardError(
                    f"shard {url} is missing from the object store: the store at {self.remote.url} was deleted or "
                    "rewritten while being read; open it again (or write it again)"
                ) from None
            except OSError as exc:
                part.unlink(missing_ok=True)
                if isinstance(exc, StokerError) or exc.errno not in LOCAL_ERRNOS:
                    raise
                raise StoreWriteError.from_os_error(exc, part) from None
            problem = shard_problem(part, info, digest)
            if not problem:
                os.replace(part, final)
                self.files.checked(info.file)
                self.files.ahead.add(info.file)  # until the reader maps it (holding)
                with self._lock:
                    self._counts["shards_fetched"] += 1
                    self._counts["bytes_fetched"] += info.bytes
                    self._fetched_by[route] = self._fetched_by.get(route, 0) + 1
                return
            part.unlink(missing_ok=True)
            if attempt == 0:
                self._count("checksum_retries")
        raise ShardError(
            f"shard {url} arrived twice with {problem}: the object was altered or truncated in the object store; "
            f"write the store at {self.remote.url} again (overwrite=True), or restore the object"
        )

    def _arrive(self, info: ShardInfo, part: Path) -> tuple[str, str]:
        """Download shard ``info`` into ``part`` (one try), its checksum taken on the way; the checksum, and the
        fetcher that brought it."""
        hasher = new_hasher(info.algorithm)
        self.remote.fetcher.download(info.file, part, info.bytes, hasher.update)
        return str(hasher.hexdigest()), self.remote.fetcher.name

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def verify(self) -> None:
        """Fetch every shard not cached (each checked on arrival) and check the checksums of the cached ones."""
        self.files.known.clear()
        for index in range(len(self.manifest.shards)):
            with self.holding(index):
                pass

    def close(self) -> None:
        """Stop the background downloads not started yet; the running ones finish."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._pending.clear()
        if pool is not None:
            pool.cancel()


__all__ = ["FETCH_THREADS", "RemoteShards", "open_remote", "open_store", "parse_manifest"]
