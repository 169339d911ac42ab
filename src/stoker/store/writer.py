"""Writing a store: streaming, sharded by size, atomic.

Rows are buffered until a shard's worth of bytes is reached, then written as one Arrow
record batch. Everything goes to a hidden temporary directory beside the destination,
which is renamed into place only after the manifest is written: a writer that is killed
leaves no directory that opens as a store. ``overwrite=True`` swaps the new store for the old
one atomically where the kernel can (``replace.py``: hidden names carry the writer's pid;
leftovers of killed writers are recovered or deleted when the destination is next written).

Resumable writing: with ``staging=DIR`` the writer works in that fixed directory instead of
a random one and records every finished shard in ``DIR/journal.json`` (written atomically
after the shard; ``journal.py``). A writer opened later on the same ``DIR`` keeps those shards and starts
with ``rows_written`` equal to their rows; the caller skips that many rows of its input. An
interrupted or failed staging writer keeps its finished shards (delete ``DIR`` to start over).
The writer holds an exclusive lock on ``DIR`` from its start to its end (a second writer on
the same ``DIR`` is refused with an error naming the first); an optional content
``fingerprint`` recorded in the journal keeps a resume from mixing two inputs.

Shards written in parallel: :meth:`StoreWriter.reserve_shard` hands out the next shard as a
``ShardTask``, whose ``write(columns)`` the caller may run on a thread of its own (a page-cache
write runs at one core's speed, so two writers convert faster than one); ``commit_shard`` then
records finished tasks in the order they were reserved. This module starts no threads.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, EmptyDatasetError, SchemaError, StoreExistsError
from stoker.store.columns import (
    Ragged,
    chunk_row_bytes,
    concat_chunks,
    infer_from_batch,
    infer_from_sample,
    slice_chunk,
    stack_rows,
    to_chunks,
)
from stoker.store.format import SHARD_PATTERN, Column, Manifest, ShardInfo
from stoker.store.journal import (
    JOURNAL_NAME,
    LOCK_NAME,
    Fingerprint,
    lock_staging,
    resume_staging,
    unlock_staging,
    write_journal,
)
from stoker.store.replace import (
    check_writable,
    hidden_dir,
    recover,
    remove_tree,
    replace_dir,
    sweep,
    unwritable,
)
from stoker.store.shardfile import ShardTask, record_batch
from stoker.store.sizes import parse_size
from stoker.store.urls import is_remote

DEFAULT_SHARD_SIZE = 256 * 2**20
_ROWS_PER_FLUSH = 1024  # add() buffers this many rows before turning them into column chunks


class StoreWriter:
    """Write rows into a new store at ``path``.

    Use as a context manager; rows come one at a time (:meth:`add`) or as column batches
    (:meth:`add_batch`). The store appears at ``path`` when the block ends without error.
    A URL ``path`` (``s3://bucket/prefix``) is a ConfigError here: ``stoker.StoreWriter`` writes it
    (a ``RemoteStoreWriter``, ``stoker/remote/upload.py``).

    Args:
        path: destination directory; must not exist unless ``overwrite=True``.
        schema: column name -> :class:`~stoker.store.format.Column` (``stoker.Tensor(...)``,
            ``stoker.Sequence(...)``, ...). Inferred from the first rows when omitted.
        shard_size: bytes of data per shard (int or ``"256MB"``); one shard is held in RAM while writing.
        overwrite: replace an existing store at ``path`` (and a staging directory holding another
            input's partial write).
        metadata: JSON-serializable dict kept in the manifest (class names, tokenizer, ...).
        staging: a fixed working directory that makes the write resumable (see the module
            docstring). A journal there must have been written with the same ``metadata``
            (callers put what identifies their input in it), else a ConfigError says so. The
            writer locks it until it closes or aborts; a second writer is refused (StoreError).
        fingerprint: with ``staging``, content hashes of a few input samples (index -> hash or
            None); a journal whose hashes differ from these holds another input (ConfigError,
            or a fresh start with ``overwrite=True``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: Mapping[str, Column] | None = None,
        *,
        shard_size: int | str = DEFAULT_SHARD_SIZE,
        overwrite: bool = False,
        metadata: Mapping[str, Any] | None = None,
        staging: str | os.PathLike[str] | None = None,
        fingerprint: Fingerprint | None = None,
    ) -> None:
        if is_remote(path):  # a URL is written to object storage (stoker.remote), never to a directory
            raise ConfigError(
                f"{os.fspath(path)} is a URL; write it with stoker.StoreWriter or stoker.write", option="path"
            )
        self.path = Path(path)
        self.shard_bytes = parse_size(shard_size)
        self.overwrite = overwrite
        self.metadata = dict(metadata or {})
        try:
            json.dumps(self.metadata)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"metadata must be JSON-serializable: {exc}", option="metadata") from exc
        if schema is not None:
            for name, col in schema.items():
                if not isinstance(col, Column):
                    raise SchemaError(
                        f"schema[{name!r}] must be a stoker column (stoker.Tensor(...), ...), not {col!r}", column=name
                    )
        self.schema: dict[str, Column] | None = dict(schema) if schema is not None else None
        recover(self.path)  # a store left hidden by a writer killed mid-swap comes back first
        sweep(self.path)
        if self.path.exists() and not overwrite:
            raise StoreExistsError(f"{self.path} exists; pass overwrite=True to replace it", path=self.path)
        check_writable(self.path)  # a path that cannot be written fails now, not after all the work
        self._tmp: Path | None = None
        self._rows: list[Mapping[str, Any]] = []
        self._chunks: dict[str, list[Any]] = {}
        self._pending_rows = 0
        self._pending_bytes = 0
        self._shards: list[ShardInfo] = []
        self._reserved: deque[ShardTask] = deque()
        self._rows_written = 0
        self._closed = False
        self._staging = None if staging is None else Path(staging)
        self._fingerprint = None if fingerprint is None else dict(fingerprint)
        self._lock: int | None = None
        if self._staging is not None:
            self._lock = lock_staging(self._staging)
            try:
                resumed = resume_staging(self._staging, self.metadata, self.schema, self._fingerprint, overwrite)
            except BaseException:
                self._unlock()
                raise
            if resumed is not None:
                self.schema, self._shards = resumed
                self._rows_written = sum(info.rows for info in self._shards)
                self._tmp = self._staging

    def _unlock(self) -> None:
        if self._lock is not None:
            unlock_staging(self._lock)
            self._lock = None

    # -- context manager ------------------------------------------------------------------
    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # -- adding rows ----------------------------------------------------------------------
    @property
    def rows_written(self) -> int:
        """Rows accepted so far (buffered or on disk)."""
        return self._rows_written + self._pending_rows + len(self._rows)

    def add(self, sample: Mapping[str, Any]) -> None:
        """Add one row: a dict of column name -> value."""
        if not isinstance(sample, Mapping):
            raise SchemaError(
                f"row {self.rows_written}: a sample must be a dict of column -> value, not {type(sample).__name__}",
                row=self.rows_written,
            )
        if self.schema is None:
            self.schema = {name: infer_from_sample(name, value) for name, value in sample.items()}
        self._rows.append(sample)
        if len(self._rows) >= _ROWS_PER_FLUSH:
            self._flush_rows()

    def add_batch(self, columns: Mapping[str, Any]) -> None:
        """Add many rows at once: column name -> values with the rows along the first axis."""
        self._flush_rows()
        self._add_columns(columns)

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        first = self.rows_written
        stacked = stack_rows(rows, self._schema(), first)
        self._add_columns(stacked, first_row=first)

    def _add_columns(self, columns: Mapping[str, Any], first_row: int | None = None) -> None:
        if self._closed:
            raise RuntimeError("this StoreWriter is closed")
        if self.schema is None:
            self.schema = {name: infer_from_batch(name, values) for name, values in columns.items()}
        chunks, n = to_chunks(self.schema, columns, self.rows_written if first_row is None else first_row)
        row_bytes = np.zeros(n, dtype=np.int64)
        for name, c in chunks.items():
            row_bytes += chunk_row_bytes(self.schema[name], c)
        start = 0
        while start < n:
            cum = np.cumsum(row_bytes[start:])
            fits = int(np.searchsorted(cum, self.shard_bytes - self._pending_bytes, side="right"))
            if fits == 0 and self._pending_rows:
                self._write_shard()
                continue
            stop = start + max(fits, 1)
            for name, c in chunks.items():
                self._chunks.setdefault(name, []).append(slice_chunk(c, start, stop))
            self._pending_rows += stop - start
            self._pending_bytes += int(cum[stop - start - 1])
            start = stop
            if self._pending_bytes >= self.shard_bytes:
                self._write_shard()

    def _schema(self) -> dict[str, Column]:
        if self.schema is None:  # only reachable with no row added, which close() reports as empty
            raise EmptyDatasetError(f"no rows were written to {self.path}; a store needs at least one row")
        return self.schema

    # -- shards and the end -----------------------------------------------------------------
    def _tmpdir(self) -> Path:
        if self._tmp is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self._staging is not None:
                    self._staging.mkdir(parents=True, exist_ok=True)
                    self._tmp = self._staging
                else:
                    tmp = hidden_dir(self.path, "tmp")
                    tmp.mkdir()
                    self._tmp = tmp
            except OSError as exc:
                raise unwritable(self.path, exc) from None
        return self._tmp

    def _write_shard(self) -> None:
        if not self._pending_rows:
            return
        if self._reserved:
            raise RuntimeError(
                f"{len(self._reserved)} reserved shard(s) must be committed before rows added with add()/add_batch() are written"
            )
        schema = self._schema()
        batch = record_batch(schema, {name: concat_chunks(col, self._chunks[name]) for name, col in schema.items()})
        self.commit_shard(self._reserve().write_batch(batch))
        self._chunks.clear()
        self._pending_rows = 0
        self._pending_bytes = 0

    def reserve_shard(self) -> ShardTask:
        """The next shard, to be written by ``task.write(columns)`` on any thread, then given to :meth:`commit_shard`.

        Rows buffered by :meth:`add` / :meth:`add_batch` are written first. The schema must be
        known (declared, or inferred from rows already added). Every reserved task must be
        committed, in the order reserved, before the writer closes; a caller that writes
        tasks on threads waits for them all before the writer closes or aborts.
        """
        if self._closed:
            raise RuntimeError("this StoreWriter is closed")
        self._flush_rows()
        self._write_shard()
        if self.schema is None:
            raise SchemaError("reserve_shard needs the store's schema: declare it, or add rows first")
        return self._reserve()

    def _reserve(self) -> ShardTask:
        name = SHARD_PATTERN.format(len(self._shards) + len(self._reserved))
        task = ShardTask(name, self._tmpdir() / name, self._schema())
        self._reserved.append(task)
        return task

    def commit_shard(self, task: ShardTask) -> None:
        """Record a written shard from :meth:`reserve_shard`; tasks come back in the order reserved."""
        if not self._reserved or task is not self._reserved[0]:
            raise RuntimeError(f"shard {task.file} is not the next reserved shard; commit shards in the order reserved")
        if task.info is None:
            raise RuntimeError(f"shard {task.file} was reserved but not written")
        self._reserved.popleft()
        self._shards.append(task.info)
        self._rows_written += task.info.rows
        if self._staging is not None:
            write_journal(self._tmpdir(), self._schema(), self._shards, self.metadata, self._fingerprint)

    def _last_shard(self, where: str | os.PathLike[str]) -> None:
        """Write what is buffered as the last shard; every reserved shard committed, at least one row (else an
        error naming ``where``, the store's path or URL)."""
        if self._reserved:
            raise RuntimeError(f"{len(self._reserved)} reserved shard(s) were never committed")
        self._flush_rows()
        self._write_shard()
        if not self._shards:
            raise EmptyDatasetError(f"no rows were written to {where}; a store needs at least one row")

    def close(self) -> Path:
        """Write what is buffered, the manifest, and move the store into place."""
        if self._closed:
            return self.path
        try:
            self._last_shard(self.path)
            tmp = self._tmpdir()
            Manifest(self._schema(), tuple(self._shards), self.metadata).write(tmp)
            if self._staging is not None:
                # killed before this rename, the staging dir still resumes (every shard in its
                # journal); after it, the store is complete under this writer's pid (replace.py)
                moved = hidden_dir(self.path, "tmp")
                os.rename(tmp, moved)
                self._tmp = tmp = moved
                (tmp / LOCK_NAME).unlink()  # still held: a new writer locks a new staging dir
            replace_dir(tmp, self.path, self.overwrite)
            self._tmp = None
            (self.path / JOURNAL_NAME).unlink(missing_ok=True)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._unlock()
        return self.path

    def abort(self) -> None:
        """Drop everything written so far; nothing appears at ``path``. A staging writer keeps its finished shards."""
        self._closed = True
        if self._tmp is not None and self._staging is None:
            remove_tree(self._tmp)
            self._tmp = None
        elif self._tmp is not None and self._staging is not None and self._tmp != self._staging:
            try:  # moved out of the staging dir, then not put in place: its shards and journal go back
                os.rename(self._tmp, self._staging)
            except OSError:
                remove_tree(self._tmp)
            self._tmp = None
        self._unlock()


def write(
    path: str | os.PathLike[str],
    data: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    schema: Mapping[str, Column] | None = None,
    *,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    overwrite: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``data`` as a store in the local directory ``path`` and return the path (see :func:`fill`).

    ``stoker.write`` takes a URL too.
    """
    with StoreWriter(path, schema, shard_size=shard_size, overwrite=overwrite, metadata=metadata) as writer:
        fill(writer, data)
    return Path(path)


def fill(writer: StoreWriter, data: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> None:
    """Add ``data`` to ``writer``: a dict of columns (arrays, tensors or lists with rows along the first
    axis; :class:`Ragged` or lists of 1-D arrays for sequences), or any iterable of sample dicts,
    consumed as a stream."""
    if isinstance(data, Mapping):
        if not data:
            raise EmptyDatasetError("data has no columns")
        writer.add_batch(data)
    else:
        for sample in data:
            writer.add(sample)


__all__ = ["StoreWriter", "write", "fill", "parse_size", "Ragged", "DEFAULT_SHARD_SIZE"]
