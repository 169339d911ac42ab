"""One shard of a store, opened: its file checked, its record batch validated, viewed as numpy.

:class:`_Shard` maps a shard and validates it in full (``RecordBatch.validate(full=True)``, the
schema and field metadata against the manifest) before any numpy view is made, so a damaged shard
is a ``ShardError`` naming it, never a crash. :class:`ShardCache` maps shards on first touch and
keeps at most a cap of them mapped (least recently used dropped first); :func:`mapped_shards_cap`
derives the cap from the kernel's ``vm.max_map_count``. :class:`PinnedDir` holds a local store's
directory open, so that a store rewritten under its reader is an error, never a mix of two versions.
:mod:`stoker.store.reader` builds the store and its gathers on these.
"""

from __future__ import annotations

import os
import stat
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from stoker import settings
from stoker.errors import ConfigError, ShardError, StoreError
from stoker.store.format import DTYPE_KEY, SHAPE_KEY, Column, ShardInfo, arrow_schema


@dataclass(frozen=True)
class ColumnView:
    """Zero-copy numpy views of one column of one shard."""

    data: np.ndarray  # tensor: (rows, *shape); others: flat values / bytes
    offsets: np.ndarray | None = None  # int64, rows + 1 (sequence, binary, string)

    @cached_property
    def address(self) -> int:
        """Where ``data`` starts in memory (asked of numpy once: it costs microseconds per gather)."""
        return int(self.data.__array_interface__["data"][0])

    def row_offsets(self) -> np.ndarray:
        """``offsets``, which every column but a tensor column has."""
        if self.offsets is None:
            raise TypeError("a tensor column has no row offsets")
        return self.offsets


# shards kept mapped at once (one map each) where /proc/sys/vm/max_map_count cannot be read
DEFAULT_MAX_MAPPED_SHARDS = 8192
# the least default cap taken from max_map_count, however small the kernel's limit
MIN_MAX_MAPPED_SHARDS = 1024
MAX_MAPPED_ENV = "STOKER_MAX_MAPPED_SHARDS"
MAX_MAP_COUNT_FILE = "/proc/sys/vm/max_map_count"


def _read_max_map_count() -> int | None:
    """The kernel's ``vm.max_map_count`` (read now), or None where /proc does not say."""
    try:
        return int(Path(MAX_MAP_COUNT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def max_mapped_shards() -> int:
    """How many shards a store keeps mapped: ``STOKER_MAX_MAPPED_SHARDS``, else half of the
    kernel's ``vm.max_map_count`` (both read now); see :func:`mapped_shards_cap`."""
    return mapped_shards_cap(_read_max_map_count(), settings.env(MAX_MAPPED_ENV))


def mapped_shards_cap(max_map_count: int | None, env: str | None) -> int:
    """The cap on a store's mapped shards, from the kernel's ``vm.max_map_count`` (None: unknown)
    and the value of ``STOKER_MAX_MAPPED_SHARDS`` (None or empty: unset).

    Set, the variable wins (an integer >= 1, else :class:`ConfigError`). Unset: half of
    ``max_map_count`` (the other half is left to the rest of the process: libraries, other stores),
    never below :data:`MIN_MAX_MAPPED_SHARDS`; :data:`DEFAULT_MAX_MAPPED_SHARDS` when it is unknown.
    """
    if env is None or env == "":
        if max_map_count is None or max_map_count < 1:
            return DEFAULT_MAX_MAPPED_SHARDS
        return max(max_map_count // 2, MIN_MAX_MAPPED_SHARDS)
    try:
        cap = int(env)
    except ValueError:
        cap = 0
    if cap < 1:
        raise ConfigError(
            f"{MAX_MAPPED_ENV}={env!r} must be an integer >= 1 (shards kept memory-mapped at once); "
            "unset it for the default: half of /proc/sys/vm/max_map_count",
            option=MAX_MAPPED_ENV,
        )
    return cap


def check_shard_file(directory: Path, info: ShardInfo) -> None:
    """The shard file exists inside the store and has the manifest's size; ShardError if not.

    One ``lstat`` on a plain path string (open runs this per shard: 100,000 shards must stay cheap);
    a symlink goes through :func:`shard_path`, which refuses one that leads outside the store.
    """
    st = _stat(os.path.join(directory, info.file))
    if stat.S_ISLNK(st.st_mode):
        st = _stat(shard_path(directory, info), follow=True)
    if stat.S_ISREG(st.st_mode) and st.st_size == info.bytes:
        return
    path = directory / info.file
    if not stat.S_ISREG(st.st_mode):
        raise ShardError(f"shard {path} is missing (not a regular file); the store is incomplete", path=path)
    if st.st_size != info.bytes:
        raise ShardError(
            f"shard {path} is {st.st_size} bytes, the manifest says {info.bytes}: it was truncated or altered "
            "(write the store again, or restore the file)",
            path=path,
        )


class PinnedDir:
    """A local store's directory as it was opened, held open so that a rewrite under a reader is seen.

    Shard files keep fixed names, and a writer replaces a whole store by swapping a new directory
    into its path (``replace.py``): a shard mapped by path after the swap would be the new
    version's, read with the old manifest. So the store keeps the directory it opened open (a
    file descriptor pins its ``(st_dev, st_ino)``: no later directory can take that identity) and
    :meth:`check` compares the path with it after each shard is mapped (one ``stat`` per mapping,
    none per batch). Whatever was mapped before the check passed came from the opened directory;
    after a swap the check fails with a ShardError, so a reader gets one version's rows or an error.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            if hasattr(os, "O_DIRECTORY"):  # O_PATH (Linux): held without read permission, as a path is
                fd = os.open(path, getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY)
                weakref.finalize(self, os.close, fd)
                st = os.fstat(fd)
            else:  # Windows: a directory cannot be opened (nor deleted while its files are mapped)
                st = os.stat(path)
        except OSError as exc:
            raise StoreError(f"cannot open the store directory {path} ({exc.strerror or exc})", path=path) from exc
        self.identity = (st.st_dev, st.st_ino)

    def same(self) -> bool:
        """Whether ``path`` still names the directory opened."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def check(self, what: str) -> None:
        """Raise :func:`rewritten` (``what``) unless ``path`` still names the directory opened."""
        if not self.same():
            raise rewritten(self.path, what)


def rewritten(path: Path, what: str) -> ShardError:
    """The error of the store at ``path`` rewritten under its reader; ``what`` is of another version."""
    return ShardError(
        f"the store at {path} was rewritten (or moved or deleted) while it was read: {what}, and its rows "
        "would mix both versions; open the store again (a new loader) to read the version there now",
        path=path,
    )


class _Shard:
    """One shard, opened: its size checked, its record batch fully validated, then viewed as numpy.

    Nothing is viewed before ``RecordBatch.validate(full=True)`` has checked every buffer size and
    every offset (monotonic, inside its values), so a damaged shard is a ShardError naming it,
    never a crash or a read outside the file.
    """

    def __init__(self, directory: Path, info: ShardInfo, schema: dict[str, Column]) -> None:
        check_shard_file(directory, info)
        path = self.path = directory / info.file
        try:
            table = read_shard(path)
            batches = table.to_batches()
            batch = batches[0] if len(batches) == 1 else table.combine_chunks().to_batches()[0]
            batch.validate(full=True)
        except _PARSE_ERRORS as exc:
            raise ShardError(
                f"shard {path} is not a readable Arrow IPC shard, stream or file ({type(exc).__name__}: {exc}); "
                "the store is corrupt (write it again, or restore the file)",
                path=path,
            ) from exc
        expected = arrow_schema(schema)
        if not batch.schema.equals(expected):
            raise ShardError(f"shard {path} has schema {batch.schema}, the manifest declares {expected}", path=path)
        _check_field_metadata(path, batch.schema, expected)
        if batch.num_rows != info.rows:
            raise ShardError(f"shard {path} holds {batch.num_rows} rows, the manifest says {info.rows}", path=path)
        self.rows = info.rows
        self.batch = batch
        try:
            self.columns = {
                name: _view(batch.column(i), col, info.rows) for i, (name, col) in enumerate(schema.items())
            }
        except _PARSE_ERRORS as exc:
            raise ShardError(
                f"shard {path}: its columns cannot be viewed ({type(exc).__name__}: {exc}); the store is corrupt",
                path=path,
            ) from exc


# what parsing a damaged shard can raise (pyarrow errors are ArrowException; the rest come from numpy views)
_PARSE_ERRORS = (pa.ArrowException, OSError, ValueError, TypeError, IndexError, OverflowError, MemoryError)


def shard_path(directory: Path, info: ShardInfo) -> Path:
    """The path of shard ``info``: a file whose real path (symlinks resolved) lies inside ``directory``.

    A missing shard, or one that is (or links to) a file outside the store, is a ShardError naming it.
    """
    path = directory / info.file  # info.file has no "/" (the manifest is checked): only the file itself can link out
    if not stat.S_ISLNK(_stat(path).st_mode):
        return path
    real, home = path.resolve(), directory.resolve()
    if not real.is_relative_to(home) or real == home:
        raise ShardError(
            f"shard {path} links to {real}, outside the store directory {home}; stoker reads only files "
            "inside a store (copy the file into the store, or write the store again)",
            path=path,
        )
    return path


def _stat(name: str | Path, follow: bool = False) -> os.stat_result:
    """``os.stat`` of shard file ``name`` (a link itself unless ``follow``); missing or unreadable: a ShardError."""
    try:
        return os.stat(name, follow_symlinks=follow)
    except FileNotFoundError:
        raise ShardError(
            f"shard {name} is missing; the store is incomplete (write it again)", path=Path(name)
        ) from None
    except OSError as exc:
        raise ShardError(f"shard {name} cannot be read ({exc.strerror or exc})", path=Path(name)) from exc


def _check_field_metadata(path: Path, found: pa.Schema, expected: pa.Schema) -> None:
    """Tensor shapes and dtypes in the shard's field metadata (format 3 on) must be the manifest's."""
    for have, want in zip(found, expected):
        meta = have.metadata or {}
        for key in (SHAPE_KEY, DTYPE_KEY):
            if key in meta and meta[key] != (want.metadata or {}).get(key):
                raise ShardError(
                    f"shard {path}: column {have.name!r} has {key.decode()} {meta[key].decode(errors='replace')!r}, "
                    f"the manifest declares {(want.metadata or {}).get(key, b'none').decode()!r}; the manifest "
                    "or the shard was altered (write the store again)",
                    path=path,
                )


class ShardCache:
    """The mapped shards of one store, shared by its views: a shard is mapped (and validated, in
    ``_Shard``) on first touch, and at most ``cap`` stay mapped (least recently used dropped first).
    Thread-safe.

    Dropping a shard from the cache unmaps it once no gather still holds it: a gather keeps the
    shards it reads referenced until it returns, so eviction never pulls a map from under a reader.

    ``fetch`` (a remote store's ``RemoteShards.holding``) brings a shard's file into ``directory``
    and keeps it there while it is mapped; a local store has none, and a ``pinned`` directory
    instead, checked after each mapping (:class:`PinnedDir`).
    """

    def __init__(
        self,
        directory: Path,
        infos: Sequence[ShardInfo],
        schema: dict[str, Column],
        cap: int,
        fetch: Callable[[int], AbstractContextManager[None]] | None = None,
        pinned: PinnedDir | None = None,
    ) -> None:
        self.directory = directory
        self.infos = infos
        self.schema = schema
        self.cap = cap
        self.fetch = fetch
        self.pinned = pinned
        self._mapped: OrderedDict[int, _Shard] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, index: int) -> _Shard:
        """Shard ``index``, mapped (and checked) now if it is not mapped already."""
        with self._lock:
            shard = self._mapped.get(index)
            if shard is not None:
                self._mapped.move_to_end(index)
                return shard
        # mapped outside the lock: validating a shard pages in its data, and other readers need not wait
        info = self.infos[index]
        if self.fetch is not None:
            with self.fetch(index):
                fresh = _Shard(self.directory, info, self.schema)
        else:
            try:
                fresh = _Shard(self.directory, info, self.schema)
            finally:  # a shard gone or altered by a rewrite is reported as the rewrite
                if self.pinned is not None:
                    self.pinned.check(f"shard {info.file} is not the one its manifest names")
        with self._lock:
            shard = self._mapped.setdefault(index, fresh)
            self._mapped.move_to_end(index)
            while len(self._mapped) > self.cap:
                self._mapped.popitem(last=False)
        return shard

    def discard(self, index: int) -> None:
        """Drop shard ``index`` from the maps (a gather still holding it keeps its map until it returns)."""
        with self._lock:
            self._mapped.pop(index, None)

    def mapped_set(self) -> frozenset[int]:
        """The indices of the shards mapped now, as a set."""
        with self._lock:
            return frozenset(self._mapped)

    def mapped(self) -> list[int]:
        """The indices of the shards mapped now, least recently used first."""
        with self._lock:
            return list(self._mapped)


FILE_MAGIC = b"ARROW1"  # the first bytes of an Arrow IPC *file* (format versions 1-2); a stream has none


def read_shard(path: Path) -> pa.Table:
    """One shard, memory-mapped, as a Table (zero-copy): an IPC stream (format 3) or an IPC file (1-2)."""
    source = pa.memory_map(str(path), "r")
    is_file = source.read(len(FILE_MAGIC)) == FILE_MAGIC
    source.seek(0)
    if is_file:
        return pa.ipc.open_file(source).read_all()
    return pa.ipc.open_stream(source).read_all()


def _buffer_view(buf: pa.Buffer, dtype: np.dtype, count: int, offset: int) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset * dtype.itemsize)


def _view(arr: pa.Array, col: Column, rows: int) -> ColumnView:
    if col.kind == "tensor":
        if col.shape == ():
            flat = _buffer_view(arr.buffers()[1], col.storage_dtype, rows, arr.offset)
        else:  # a fixed-size list's values from its first row (``values`` ignores a slice's offset; ``flatten()``
            # would import pyarrow.compute: 0.05-0.1 s on the way to a loader's first batch)
            size, values = arr.type.list_size, arr.values
            flat = _buffer_view(values.buffers()[1], col.storage_dtype, rows * size, arr.offset * size + values.offset)
        return ColumnView(flat.view(col.numpy_dtype).reshape((rows, *col.row_shape)))
    offsets = _buffer_view(arr.buffers()[1], np.dtype(np.int64), rows + 1, arr.offset)
    if col.kind == "sequence":
        child = arr.values
        values = _buffer_view(child.buffers()[1], col.storage_dtype, len(child), child.offset)
        return ColumnView(values.view(col.numpy_dtype), offsets)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return ColumnView(data, offsets)
