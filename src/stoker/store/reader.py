"""Reading a store: memory-mapped shards viewed as numpy arrays, and batch gathers.

``Store.gather(indices)`` is the loader's hot path: one gather per column per group of
rows that lie in the same shard. With sorted indices each group is a contiguous slice of
the output, so a fixed-width column is read with one ``np.take`` per shard straight into
the (recycled) output buffer. Which shard holds a row is a ``searchsorted`` over the shards'
first rows, and only the shards a batch touches are visited: a gather costs the same in a
store of 10 shards or 100,000.

Opening a store reads the manifest and checks each shard's size (one ``stat``), nothing more.
A shard is memory-mapped, parsed and checked against the manifest the first time a gather
touches it (``_ShardCache``); at most ``STOKER_MAX_MAPPED_SHARDS`` shards stay mapped, the
least recently used unmapped first, so a store of any shard count stays under the kernel's
``vm.max_map_count``. The default cap follows the machine (:func:`mapped_shards_cap`): half of
``/proc/sys/vm/max_map_count`` (65,530 → 32,765), never below 1,024, read when a store is opened;
:data:`DEFAULT_MAX_MAPPED_SHARDS` (8,192) where that file cannot be read. An evicted shard touched
again is mapped and validated again (the file may have changed on disk), so random reads over more
shards than the cap cost a remap each: a cap as large as the kernel allows keeps that rare.
"""

from __future__ import annotations

import copy
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from stoker.errors import ConfigError, ShardError, StoreNotFoundError
from stoker.store.columns import Ragged
from stoker.store.format import DTYPE_KEY, SHAPE_KEY, Column, Manifest, ShardInfo, arrow_schema
from stoker.store.replace import recover
from stoker.store.selection import check_indices, split_rows
from stoker.store.shardfile import file_checksum


@dataclass(frozen=True)
class _ColumnView:
    """Zero-copy numpy views of one column of one shard."""

    data: np.ndarray  # tensor: (rows, *shape); others: flat values / bytes
    offsets: np.ndarray | None = None  # int64, rows + 1 (sequence, binary, string)

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
    return mapped_shards_cap(_read_max_map_count(), os.environ.get(MAX_MAPPED_ENV))


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


def _check_file(directory: Path, info: ShardInfo) -> None:
    """The shard file exists inside the store and has the manifest's size; ShardError if not.

    One ``lstat`` on a plain path string (open runs this per shard: 100,000 shards must stay cheap);
    a symlink goes through :func:`shard_path`, which refuses one that leads outside the store.
    """
    name = os.path.join(directory, info.file)
    try:
        st = os.lstat(name)
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(shard_path(directory, info))
    except FileNotFoundError:
        path = directory / info.file
        raise ShardError(f"shard {path} is missing; the store is incomplete (write it again)", path=path) from None
    except OSError as exc:
        path = directory / info.file
        raise ShardError(f"shard {path} cannot be read ({exc.strerror or exc})", path=path) from exc
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


class _Shard:
    """One shard, opened: its size checked, its record batch fully validated, then viewed as numpy.

    Nothing is viewed before ``RecordBatch.validate(full=True)`` has checked every buffer size and
    every offset (monotonic, inside its values), so a damaged shard is a ShardError naming it,
    never a crash or a read outside the file.
    """

    def __init__(self, directory: Path, info: ShardInfo, schema: dict[str, Column]) -> None:
        path = shard_path(directory, info)
        self.path = path
        size = path.stat().st_size
        if size != info.bytes:
            raise ShardError(
                f"shard {path} is {size} bytes, the manifest says {info.bytes}: it was truncated or altered "
                "(write the store again, or restore the file)",
                path=path,
            )
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
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        raise ShardError(f"shard {path} is missing; the store is incomplete (write it again)", path=path) from None
    except OSError as exc:
        raise ShardError(f"shard {path} cannot be read ({exc.strerror or exc})", path=path) from exc
    if not link:
        return path
    real, home = path.resolve(), directory.resolve()
    if not real.is_relative_to(home) or real == home:
        raise ShardError(
            f"shard {path} links to {real}, outside the store directory {home}; stoker reads only files "
            "inside a store (copy the file into the store, or write the store again)",
            path=path,
        )
    return path


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


class _ShardCache:
    """The mapped shards of one store, shared by its views: a shard is mapped (and validated, in
    ``_Shard``) on first touch, and at most ``cap`` stay mapped (least recently used dropped first).
    Thread-safe.

    Dropping a shard from the cache unmaps it once no gather still holds it: a gather keeps the
    shards it reads referenced until it returns, so eviction never pulls a map from under a reader.
    """

    def __init__(self, directory: Path, infos: Sequence[ShardInfo], schema: dict[str, Column], cap: int) -> None:
        self.directory = directory
        self.infos = infos
        self.schema = schema
        self.cap = cap
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
        fresh = _Shard(self.directory, self.infos[index], self.schema)
        with self._lock:
            shard = self._mapped.setdefault(index, fresh)
            self._mapped.move_to_end(index)
            while len(self._mapped) > self.cap:
                self._mapped.popitem(last=False)
        return shard

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


def _view(arr: pa.Array, col: Column, rows: int) -> _ColumnView:
    if col.kind == "tensor":
        flat_arr = arr if col.shape == () else arr.flatten()
        storage = col.storage_dtype
        flat = _buffer_view(flat_arr.buffers()[1], storage, len(flat_arr), flat_arr.offset)
        return _ColumnView(flat.view(col.numpy_dtype).reshape((rows, *col.row_shape)))
    offsets = _buffer_view(arr.buffers()[1], np.dtype(np.int64), rows + 1, arr.offset)
    if col.kind == "sequence":
        child = arr.values
        values = _buffer_view(child.buffers()[1], col.storage_dtype, len(child), child.offset)
        return _ColumnView(values.view(col.numpy_dtype), offsets)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    return _ColumnView(data, offsets)


class Store:
    """A store opened for reading: a map-style dataset over memory-mapped shards.

    ``len(ds)`` rows; ``ds[i]`` one row as a dict; ``ds[[i, j, ...]]`` or ``ds[a:b]`` a batch
    (tensor columns stacked, sequence columns as :class:`Ragged`, binary/string as lists).

    ``ds.select(indices)`` and ``ds.split(parts, seed=)`` return views: Stores over the same
    memory-mapped shards whose row ``i`` is row ``indices[i]`` of this one. A view is read by the
    loader, ``stoker.text`` and ``stoker.vision`` like any store (batch-level, no copy).
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = False) -> None:
        self.path = Path(path)
        if not self.path.exists() and not recover(self.path):  # a store hidden by a writer killed mid-swap
            raise StoreNotFoundError(f"no store at {self.path}: the path does not exist", path=self.path)
        if not self.path.is_dir():
            raise StoreNotFoundError(
                f"{self.path} is a file; a store is a directory with a manifest.json", path=self.path
            )
        self.manifest = Manifest.read(self.path)
        if verify:
            self.verify()
        infos = self.manifest.shards
        for info in infos:
            _check_file(self.path, info)
        self._cache = _ShardCache(self.path, infos, self.schema, max_mapped_shards())
        rows = np.fromiter((info.rows for info in infos), dtype=np.int64, count=len(infos))
        self._starts = np.concatenate([[0], np.cumsum(rows)])
        self._len = int(self._starts[-1])
        self._rows: np.ndarray | None = None  # a view's rows of the whole store; None: all of them

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # memory maps do not pickle: a copy in another process opens the same path again
        if self._rows is None:
            return (Store, (str(self.path),))
        return (_reopen_view, (str(self.path), self._rows))

    # -- views ----------------------------------------------------------------------------
    @property
    def rows(self) -> np.ndarray | None:
        """For a view, the rows of the whole store it shows (int64, in view order); None for a whole store."""
        return None if self._rows is None else self._rows.copy()

    def select(self, indices: Any) -> Store:
        """A view of rows ``indices`` (in that order; repeats allowed) over the same shards, without a copy.

        An index outside ``0..len(self)-1`` is a ConfigError naming the first bad one.
        """
        idx = check_indices(indices, self._len)
        view = copy.copy(self)
        view._rows = idx if self._rows is None else self._rows[idx]
        view._len = len(idx)
        return view

    def split(self, parts: Sequence[float] | Sequence[int], *, seed: int = 0, shuffle: bool = True) -> list[Store]:
        """One view per part: ``parts`` are fractions summing to 1 (``[0.8, 0.1, 0.1]``) or row counts
        summing to ``len(self)``.

        The rows are dealt from a permutation drawn from ``seed`` (the same parts for the same seed,
        on every machine), or in order with ``shuffle=False``. Parts do not overlap and together
        cover every row; inside a part rows keep storage order (the loader shuffles). See
        ``store.selection.split_sizes`` for how fractions round.
        """
        return [self.select(rows) for rows in split_rows(self._len, parts, seed, shuffle)]

    # -- description ----------------------------------------------------------------------
    @property
    def schema(self) -> dict[str, Column]:
        return self.manifest.schema

    @property
    def metadata(self) -> dict[str, Any]:
        return self.manifest.metadata

    @property
    def num_shards(self) -> int:
        return len(self.manifest.shards)

    @property
    def mapped_shards(self) -> int:
        """How many of the store's shards are memory-mapped now (shared with its views); at most
        ``max_mapped_shards`` once a gather has returned."""
        return len(self._cache.mapped())

    @property
    def max_mapped_shards(self) -> int:
        """The most shards this store keeps mapped (:func:`max_mapped_shards`, taken when it was opened)."""
        return self._cache.cap

    @property
    def shard_starts(self) -> np.ndarray:
        """First global row of each shard, plus the total (length ``num_shards + 1``)."""
        return self._starts

    @property
    def nbytes(self) -> int:
        """Bytes of the shards on disk; for a view, its rows' share of them (rows x mean row size)."""
        total = sum(s.bytes for s in self.manifest.shards)
        if self._rows is None:
            return total
        return round(total * self._len / max(int(self._starts[-1]), 1))

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {_describe(c)}" for n, c in self.schema.items())
        rows = str(self._len) if self._rows is None else f"{self._len} of {int(self._starts[-1])}"
        return f"Store({str(self.path)!r}, rows={rows}, shards={self.num_shards}, columns={{{cols}}})"

    def verify(self) -> None:
        """Check every shard's size and checksum against the manifest; raise ShardError on the first bad one."""
        for info in self.manifest.shards:
            path = shard_path(self.path, info)
            if path.stat().st_size != info.bytes:
                raise ShardError(
                    f"shard {path} is {path.stat().st_size} bytes, the manifest says {info.bytes}", path=path
                )
            digest = file_checksum(path, info.algorithm)
            if digest != info.checksum:
                raise ShardError(
                    f"shard {path} has {info.algorithm} {digest[:16]}..., the manifest says {info.checksum[:16]}...: "
                    "its contents were altered (write the store again, or restore the file)",
                    path=path,
                )

    def table(self) -> pa.Table:
        """All shards as one pyarrow Table (zero-copy, memory-mapped); a view's rows are taken (a copy).

        Every shard goes through the gather path's checks first (``_Shard``: size, full validation,
        schema, rows), so a damaged shard is a ShardError naming it here too, never a Table whose
        offsets point outside the file.
        """
        tables = []
        for i, info in enumerate(self.manifest.shards):
            self._cache.get(i)  # validated (or already validated and mapped) like a gather's shards
            tables.append(read_shard(shard_path(self.path, info)))
        table = pa.concat_tables(tables)
        return table if self._rows is None else table.take(pa.array(self._rows))

    # -- access ---------------------------------------------------------------------------
    def __getitem__(self, key: int | slice | Sequence[int] | np.ndarray) -> dict[str, Any]:
        if isinstance(key, (int, np.integer)):
            i = int(key)
            if i < 0:
                i += self._len
            if not 0 <= i < self._len:
                raise IndexError(f"row {key} is out of range for a store of {self._len} rows")
            batch = self.gather(np.array([i]))
            return {name: _first(col, batch[name]) for name, col in self.schema.items()}
        if isinstance(key, slice):
            return self.gather(np.arange(*key.indices(self._len)))
        idx = np.asarray(key)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"store indices must be integers, a slice or a list of integers, not {idx.dtype}")
        idx = np.where(idx < 0, idx + self._len, idx)
        return self.gather(idx)

    def gather(
        self,
        indices: np.ndarray,
        columns: Sequence[str] | None = None,
        out: Mapping[str, np.ndarray] | None = None,
    ) -> dict[str, Any]:
        """Read rows ``indices`` (in that order) of ``columns`` (default: all).

        ``out`` may hold preallocated arrays for tensor columns, shaped ``(len(indices), *shape)``;
        they are filled and returned. Sorted indices take the fastest path.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self._len):
            bad = idx[(idx < 0) | (idx >= self._len)][0]
            raise IndexError(f"row {bad} is out of range for a store of {self._len} rows")
        if self._rows is not None:
            idx = self._rows[idx]
        names = list(self.schema) if columns is None else list(columns)
        for name in names:
            if name not in self.schema:
                raise KeyError(f"no column {name!r}; the store has {list(self.schema)}")
        plan = _Plan(idx, self._starts)
        # only the shards this batch touches, held until the gather returns (eviction cannot unmap them)
        shards = {s: self._cache.get(s) for s, _ in plan.runs}
        result: dict[str, Any] = {}
        for name in names:
            col = self.schema[name]
            views = {s: shard.columns[name] for s, shard in shards.items()}
            if col.kind == "tensor":
                target = None if out is None else out.get(name)
                result[name] = _gather_tensor(col, views, plan, target)
            elif col.kind == "sequence":
                result[name] = _gather_ragged(col, views, plan)
            else:
                result[name] = _gather_blobs(views, plan, col.kind == "string")
        return result


class _Plan:
    """Where each requested row lives: (shard, local row), grouped into runs of one shard."""

    def __init__(self, idx: np.ndarray, starts: np.ndarray) -> None:
        self.n = len(idx)
        shard = np.searchsorted(starts, idx, side="right") - 1
        self.local = idx - starts[shard]
        self.sorted = bool(self.n < 2 or np.all(shard[1:] >= shard[:-1]))
        if self.sorted:
            # contiguous runs: (shard, start, stop) positions in the output
            if self.n == 0:
                self.runs: list[tuple[int, np.ndarray | slice]] = []
            else:
                cuts = np.flatnonzero(shard[1:] != shard[:-1]) + 1
                bounds = np.concatenate([[0], cuts, [self.n]])
                self.runs = [(int(shard[a]), slice(int(a), int(b))) for a, b in zip(bounds[:-1], bounds[1:])]
        else:
            self.runs = [(int(s), np.flatnonzero(shard == s)) for s in np.unique(shard)]


def _gather_tensor(col: Column, views: Mapping[int, _ColumnView], plan: _Plan, out: np.ndarray | None) -> np.ndarray:
    shape = (plan.n, *col.row_shape)
    if out is None:
        out = np.empty(shape, dtype=col.numpy_dtype)
    elif out.shape != shape or out.dtype != col.numpy_dtype:
        raise ValueError(
            f"out buffer for a {col.dtype}{list(col.row_shape)} column has shape {out.shape} "
            f"and dtype {out.dtype}, expected {shape}"
        )
    for shard, pos in plan.runs:
        src = views[shard].data
        if isinstance(pos, slice):
            np.take(src, plan.local[pos], axis=0, out=out[pos], mode="clip")
        else:
            out[pos] = np.take(src, plan.local[pos], axis=0)
    return out


def _gather_ragged(col: Column, views: Mapping[int, _ColumnView], plan: _Plan) -> Ragged:
    lengths = np.empty(plan.n, dtype=np.int64)
    starts = np.empty(plan.n, dtype=np.int64)
    for shard, pos in plan.runs:
        off = views[shard].row_offsets()
        local = plan.local[pos]
        starts[pos] = off[local]
        lengths[pos] = off[local + 1] - starts[pos]
    offsets = np.zeros(plan.n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=col.numpy_dtype)
    for shard, pos in plan.runs:
        if isinstance(pos, slice):  # rows in a run: their values land in one contiguous range
            a, b = int(offsets[pos.start]), int(offsets[pos.stop])
            if a < b:
                src = np.repeat(starts[pos] - offsets[pos.start : pos.stop], lengths[pos]) + np.arange(a, b)
                np.take(views[shard].data, src, out=values[a:b])
            continue
        rows = np.arange(plan.n)[pos]
        run_len = lengths[rows]
        if not run_len.sum():
            continue
        # flat source index of every value of these rows, without a Python loop
        dest = np.repeat(offsets[rows], run_len) + _ramp(run_len)
        src = np.repeat(starts[rows], run_len) + _ramp(run_len)
        values[dest] = views[shard].data[src]
    return Ragged(values, offsets)


def _ramp(lengths: np.ndarray) -> np.ndarray:
    """[0..l0-1, 0..l1-1, ...] for lengths [l0, l1, ...]."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)


def _gather_blobs(views: Mapping[int, _ColumnView], plan: _Plan, as_text: bool) -> list[Any]:
    result: list[Any] = [None] * plan.n
    for shard, pos in plan.runs:
        view = views[shard]
        off = view.row_offsets()
        for i in np.arange(plan.n)[pos]:
            j = plan.local[i]
            raw = view.data[off[j] : off[j + 1]].tobytes()
            result[i] = raw.decode("utf-8") if as_text else raw
    return result


def _reopen_view(path: str, rows: np.ndarray) -> Store:
    return Store(path).select(rows)


def _first(col: Column, value: Any) -> Any:
    if col.kind == "tensor":
        return value[0]
    if col.kind == "sequence":
        return value[0].copy()
    return value[0]


def _describe(col: Column) -> str:
    if col.kind == "tensor":
        return f"{col.dtype}{list(col.row_shape)}" if col.row_shape else str(col.dtype)
    if col.kind == "sequence":
        return f"sequence<{col.dtype}>"
    return col.kind


def open(path: str | os.PathLike[str], *, verify: bool = False) -> Store:  # noqa: A001
    """Open the store at ``path``. ``verify=True`` checks every shard's checksum first."""
    return Store(path, verify=verify)


__all__ = [
    "DEFAULT_MAX_MAPPED_SHARDS",
    "MAX_MAPPED_ENV",
    "MIN_MAX_MAPPED_SHARDS",
    "Store",
    "mapped_shards_cap",
    "max_mapped_shards",
    "open",
]
