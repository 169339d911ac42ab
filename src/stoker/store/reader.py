"""Reading a store: memory-mapped shards viewed as numpy arrays, and batch gathers.

``Store.gather(indices)`` is the loader's hot path: one gather per column per group of
rows that lie in the same shard. With sorted indices each group is a contiguous slice of
the output, so a fixed-width column is read with one ``np.take`` per shard straight into
the (recycled) output buffer. Which shard holds a row is a ``searchsorted`` over the shards'
first rows, and only the shards a batch touches are visited: a gather costs the same in a
store of 10 shards or 100,000.

Opening a store reads the manifest and checks each shard's size (one ``stat``), nothing more.
A shard is memory-mapped, parsed and checked against the manifest the first time a gather
touches it; at most ``STOKER_MAX_MAPPED_SHARDS`` shards stay mapped (``shards.py``: ``ShardCache``,
:func:`mapped_shards_cap`), and an evicted shard touched again is mapped and validated again. A
local store rewritten while it is read is an error, never rows of both versions (``PinnedDir``);
a copy pickled to another process checks that it opened the same version (its shard checksums).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from stoker.errors import ConfigError, ShardError, StoreError, StoreNotFoundError
from stoker.store.advice import row_ranges, willneed
from stoker.store.format import Column, Manifest
from stoker.store.gather import Plan, ascending_order, gather_columns
from stoker.store.not_a_store import hint
from stoker.store.provider import ShardProvider
from stoker.store.replace import recover
from stoker.store.selection import check_indices, split_rows
from stoker.store.shardfile import shard_problem
from stoker.store.shards import PinnedDir, ShardCache, check_shard_file, max_mapped_shards, rewritten, shard_path
from stoker.store.urls import is_remote, local_path


class Store:
    """A store opened for reading: a map-style dataset over memory-mapped shards.

    ``len(ds)`` rows; ``ds[i]`` one row as a dict; ``ds[[i, j, ...]]`` or ``ds[a:b]`` a batch
    (tensor columns stacked, sequence columns as :class:`Ragged`, binary/string as lists).

    ``ds.select(indices)`` and ``ds.split(parts, seed=)`` return views: Stores over the same
    memory-mapped shards whose row ``i`` is row ``indices[i]`` of this one. A view is read by the
    loader, ``stoker.text`` and ``stoker.vision`` like any store (batch-level, no copy).
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = False) -> None:
        if is_remote(path):  # s3://, gs://, https://, memory://, ...: never read as a directory
            raise ConfigError(
                f"{os.fspath(path)} is a URL: open it with stoker.open(url, cache_dir=..., cache_limit=..., "
                "storage_options=...), which reads it through stoker.remote",
                option="path",
            )
        self._start(local_path(path), verify)

    @classmethod
    def from_provider(cls, provider: ShardProvider, *, verify: bool = False) -> Store:
        """The store whose manifest and shard files ``provider`` gives (``provider.py``; ``stoker.remote`` makes them)."""
        store = cls.__new__(cls)
        store._start(provider, verify)
        return store

    def _start(self, where: Path | ShardProvider, verify: bool) -> None:
        self.remote: ShardProvider | None = None  # None: a local directory
        self._pinned: PinnedDir | None = None
        if isinstance(where, Path):
            self._open_local(where)
        else:
            self.remote = where
            self.path = where.directory
            self.manifest = where.manifest
        infos = self.manifest.shards
        fetch = None if self.remote is None else self.remote.holding
        self._cache = ShardCache(self.path, infos, self.schema, max_mapped_shards(), fetch, self._pinned)
        if verify:
            self.verify()
        if self.remote is not None:
            self.remote.attach(self._cache.mapped, self._cache.discard)
        rows = np.fromiter((info.rows for info in infos), dtype=np.int64, count=len(infos))
        self._starts = np.concatenate([[0], np.cumsum(rows)])
        self._len = int(self._starts[-1])
        self._bytes = sum(s.bytes for s in infos)  # of every shard (nbytes is asked per chunk of a pass)
        self._rows: np.ndarray | None = None  # a view's rows of the whole store; None: all of them

    def _open_local(self, path: Path) -> None:
        self.path = path
        if not self.path.exists() and not recover(self.path):  # a store hidden by a writer killed mid-swap
            raise StoreNotFoundError(f"no store at {self.path}: the path does not exist", path=self.path)
        if not self.path.is_dir():
            what = hint(self.path)
            raise StoreNotFoundError(
                f"{self.path} is a file; a store is a directory with a manifest.json{f' ({what})' if what else ''}",
                path=self.path,
            )
        for _ in range(_OPEN_TRIES):  # a store rewritten while it is opened is opened again
            pinned = self._pinned = PinnedDir(path)
            try:
                self.manifest = Manifest.read(path)
                for info in self.manifest.shards:
                    check_shard_file(path, info)
            except StoreError:
                if pinned.same():
                    raise
                continue
            if pinned.same():
                return
        raise rewritten(path, f"it changed each of the {_OPEN_TRIES} times it was opened")

    @property
    def url(self) -> str:
        """Where the store was opened from: its URL for a remote store, else its local path."""
        return str(self.path) if self.remote is None else self.remote.url

    def prefetch(self, indices: np.ndarray) -> None:
        """Start fetching, in the background, the shards that rows ``indices`` (in read order) lie in.

        A remote store downloads them into its cache ahead of the gathers that need them; a
        local store has nothing to do.
        """
        if self.remote is None or len(self._cache.mapped_set()) == len(self.manifest.shards):
            return  # every shard mapped (a warm epoch): nothing to fetch, and no per-batch search
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if self._rows is not None:
            idx = self._rows[idx]
        shards = np.searchsorted(self._starts, idx, side="right") - 1
        _, first = np.unique(shards, return_index=True)
        mapped = self._cache.mapped_set()  # mapped shards are in the cache: nothing to ask (no stat per shard)
        wanted = [int(s) for s in shards[np.sort(first)] if int(s) not in mapped]
        if wanted:
            self.remote.prefetch(wanted)

    def willneed(self, indices: np.ndarray, columns: Sequence[str] | None = None) -> None:
        """Ask the kernel to read rows ``indices`` of ``columns`` (default: all) into the page cache now,
        without waiting for them (``store/advice.py``): a later gather of cold rows then waits for one
        queue of reads, not a page fault at a time. Maps the shards they lie in, as a gather would.
        Advice only: rows out of range are left out, and a remote store's shards are its fetcher's."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = idx[(idx >= 0) & (idx < self._len)]
        if self.remote is not None or not idx.size:
            return
        idx = np.sort(idx if self._rows is None else self._rows[idx])
        plan = Plan(idx, self._starts, True)
        for s, run in plan.runs:
            views = self._cache.get(s).columns
            for name in self.schema if columns is None else columns:
                willneed(*row_ranges(views[name], plan.local[run]))

    def remote_stats(self) -> dict[str, Any] | None:
        """For a store read through a provider (a remote one), what this process fetched (shards, bytes, cache
        hits, retries); else None."""
        return None if self.remote is None else self.remote.stats()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # memory maps do not pickle: a copy in another process opens the same path (or provider: it pickles as a
        # new opening of its URL) again
        if self.remote is not None:
            return (_reopen_provided, (self.remote, self._rows))
        return (_reopen_local, (str(self.path), self._rows, _version(self.manifest)))

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
        total = self._bytes
        if self._rows is None:
            return total
        return round(total * self._len / max(int(self._starts[-1]), 1))

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {_describe(c)}" for n, c in self.schema.items())
        rows = str(self._len) if self._rows is None else f"{self._len} of {int(self._starts[-1])}"
        return f"Store({self.url!r}, rows={rows}, shards={self.num_shards}, columns={{{cols}}})"

    def verify(self) -> None:
        """Check every shard's size and checksum against the manifest; raise ShardError on the first bad one.

        A remote store fetches every shard (each checked on arrival) and checks the cached ones.
        """
        if self.remote is not None:
            self.remote.verify()
            return
        try:
            for info in self.manifest.shards:
                path = shard_path(self.path, info)
                problem = shard_problem(path, info)
                if problem:
                    raise ShardError(
                        f"shard {path} has {problem}: its contents were altered (write the store again, or restore "
                        "the file)",
                        path=path,
                    )
        finally:  # a shard that fails because the store was rewritten is reported as the rewrite
            if self._pinned is not None:
                self._pinned.check("the shards verified are another version's")

    def table(self) -> pa.Table:
        """All shards as one pyarrow Table (zero-copy, memory-mapped); a view's rows are taken (a copy).

        Every shard goes through the gather path's checks first (``_Shard``: size, full validation,
        schema, rows), so a damaged shard is a ShardError naming it here too, never a Table whose
        offsets point outside the file.
        """
        # validated (or already validated and mapped) like a gather's shards
        table = pa.Table.from_batches([self._cache.get(i).batch for i in range(self.num_shards)])
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
        ascending: bool | None = ascending_order(idx)  # a loader's batch: the first and last row bound the rest
        if idx.size and (
            (idx[0] < 0 or idx[-1] >= self._len) if ascending else (idx.min() < 0 or idx.max() >= self._len)
        ):
            bad = idx[(idx < 0) | (idx >= self._len)][0]
            raise IndexError(f"row {bad} is out of range for a store of {self._len} rows")
        if self._rows is not None:
            idx, ascending = self._rows[idx], None
        names = list(self.schema) if columns is None else list(columns)
        for name in names:
            if name not in self.schema:
                raise KeyError(f"no column {name!r}; the store has {list(self.schema)}")
        plan = Plan(idx, self._starts, ascending)
        # only the shards this batch touches, held until the gather returns (eviction cannot unmap them)
        shards = {s: self._cache.get(s) for s in plan.shards}
        return gather_columns(self.schema, names, shards, plan, out)


_OPEN_TRIES = 3  # times a store rewritten while it is being opened is opened again


def _version(manifest: Manifest) -> str:
    """What tells two versions of a store apart: a digest of its shard entries (names, sizes, checksums)."""
    return xxhash.xxh3_128_hexdigest(json.dumps([s.to_json() for s in manifest.shards]).encode())


def _reopen_local(path: str, rows: np.ndarray | None, version: str) -> Store:
    store = Store(path)
    if _version(store.manifest) != version:
        raise rewritten(store.path, "a copy sent to another process (a loader's worker) found another version")
    return store if rows is None else store.select(rows)


def _reopen_provided(provider: ShardProvider, rows: np.ndarray | None) -> Store:
    store = Store.from_provider(provider)
    return store if rows is None else store.select(rows)


def _first(col: Column, value: Any) -> Any:
    return value[0].copy() if col.kind == "sequence" else value[0]  # a sequence's row: not a view of the batch


def _describe(col: Column) -> str:
    if col.kind == "tensor":
        return f"{col.dtype}{list(col.row_shape)}" if col.row_shape else str(col.dtype)
    if col.kind == "sequence":
        return f"sequence<{col.dtype}>"
    return col.kind


def open(path: str | os.PathLike[str], *, verify: bool = False) -> Store:  # noqa: A001
    """Open the store at ``path``, a local directory; ``verify=True`` checks every shard's checksum first.

    A URL is opened by ``stoker.open`` (through ``stoker.remote``: ``cache_dir``, ``cache_limit``,
    ``storage_options``).
    """
    return Store(path, verify=verify)


__all__ = ["Store", "open"]
