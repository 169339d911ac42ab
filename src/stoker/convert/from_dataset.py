"""Any map-style torch Dataset into a store (``stoker.convert.dataset``): ``__getitem__`` in processes, resumable.

The life of a conversion::

    index ranges from the resume point   (main process, in dataset order)
      -> Guarded(dataset)[i] in workers  (stoker.pipeline.processes: one batch per task,
                                          failures caught per index)
      -> Columnize                       (worker: fields, per-sample schema checks, stacking)
      -> shared memory -> consumer       (failures raised or skipped and logged)
      -> StoreWriter(staging=...)        (shards + journal in STORE's ``.NAME.partial`` dir)

Resuming: the staging directory ``.NAME.partial`` beside the store keeps every finished
shard, the writer's journal and ``skipped.txt`` (indices left out with ``on_error="skip"``,
written before the rows after them can reach a shard). A new run on the same dataset (same
type, length and field names, recorded in the journal's metadata, and the same content of a
few samples: ``samples.fingerprint``) starts at the first index not yet in a finished shard,
with a ResumeWarning saying so; other input is refused (or, with ``overwrite=True``, started over). One conversion at a time works in the directory (the
writer locks it; a second is refused, naming the first's pid). The directory becomes the
store when the last shard is written.

A store URL (``s3://bucket/prefix``) stages in a local directory named after the URL, under
the stoker cache root (``STOKER_CACHE_DIR``, else ``~/.cache/stoker``: ``staging/``); each
shard is uploaded as it is finished and the manifest last (``remote/upload.py``). A resumed run
keeps the staged shards and uploads those the object store lacks; the staging directory is
removed once the manifest is up.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.convert.samples import Columnize, Failure, Guarded, check_fields, fingerprint
from stoker.errors import ConfigError, EmptyDatasetError, SampleError, SchemaError, StoreExistsError
from stoker.pipeline.collate import fetch
from stoker.pipeline.processes import ProcessPool
from stoker.pipeline.schedule import usable_cores
from stoker.pipeline.work import seed_globals
from stoker.remote.cache import default_root
from stoker.store.format import Column
from stoker.store.urls import as_url, is_remote
from stoker.store.writer import StoreWriter

ON_ERROR = ("raise", "skip")
SKIPPED_NAME = "skipped.txt"
KEEP_SKIPPED = 1000  # indices listed in the manifest's metadata (the count is always there)


class ResumeWarning(UserWarning):
    """A conversion continues from the finished shards of an earlier run (the message says at which row)."""


FINGERPRINT_TASK = "fingerprint"


class _Task:
    """What a worker runs: a batch of indices (``Guarded`` samples, then ``Columnize``), or
    :data:`FINGERPRINT_TASK`: the dataset's content fingerprint (``samples.fingerprint``)."""

    def __init__(self, guarded: Guarded, collate: Columnize, names: Sequence[str] | None, in_process: bool) -> None:
        self.guarded, self.collate, self.names = guarded, collate, names
        self.in_process = in_process  # seed the worker's global generators per batch (pipeline/work.py)

    def __call__(self, task: Any) -> Any:
        if isinstance(task, str) and task == FINGERPRINT_TASK:
            return {"fingerprint": fingerprint(self.guarded.dataset, self.names)}
        rows = [int(i) for i in task]
        if self.in_process and rows:  # forked workers share one generator state: no two may repeat draws
            seed_globals(0, 0, rows[0])
        return self.collate(fetch(self.guarded, rows))


def _fingerprint_in(pool: ProcessPool | None, dataset: Any, names: Sequence[str] | None) -> dict[str, str | None]:
    """The content fingerprint, read by a worker of ``pool`` (in this process without one)."""
    if pool is None:
        return fingerprint(dataset, names)
    (out,) = list(pool.map([FINGERPRINT_TASK], depth=1))
    return dict(out["fingerprint"])


def staging_dir(store: str | os.PathLike[str]) -> Path:
    """Where a conversion into ``store`` keeps its finished shards until it completes.

    Beside a local store; for a URL, ``<cache root>/staging/<name>-<hash of the URL>``.
    """
    if is_remote(store):
        url = as_url(store).rstrip("/")
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        name = url.rsplit("/", 1)[-1] or "store"
        return default_root() / "staging" / f"{name}-{digest}.partial"
    store = Path(store)
    return store.parent / f".{store.name}.partial"


def _read_skipped(staging: Path) -> list[int]:
    path = staging / SKIPPED_NAME
    if not path.is_file():
        return []
    return sorted({int(line) for line in path.read_text().split() if line.strip().isdigit()})


def _write_skipped(staging: Path, indices: Sequence[int], append: bool) -> None:
    staging.mkdir(parents=True, exist_ok=True)
    with open(staging / SKIPPED_NAME, "a" if append else "w") as f:
        f.write("".join(f"{i}\n" for i in indices))
        f.flush()
        os.fsync(f.fileno())


def resume_index(rows_done: int, skipped: Sequence[int]) -> int:
    """The first dataset index not yet converted: ``rows_done`` rows stored, ``skipped`` left out."""
    start = rows_done
    for k in sorted(skipped):
        if k < start:
            start += 1
        else:
            break
    return start


def _check_options(on_error: str, chunk_size: int, names: Sequence[str] | None) -> None:
    if on_error not in ON_ERROR:
        raise ConfigError(f"on_error must be one of {ON_ERROR}, not {on_error!r}", option="on_error")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be an integer >= 1, got {chunk_size!r}", option="chunk_size")
    if names is not None and (len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names)):
        raise ConfigError(f"names must be distinct non-empty strings, got {names!r}", option="names")


def convert(
    dataset: Any,
    store: str | os.PathLike[str],
    options: ConvertOptions,
    *,
    names: Sequence[str] | None = None,
    schema: Mapping[str, Column] | None = None,
    on_error: str = "raise",
    chunk_size: int = 64,
) -> ConvertResult:
    """Run ``dataset[i]`` for every index in ``options.workers`` processes and write the samples as a store.

    Args:
        dataset: any object with ``__len__`` and ``__getitem__`` (a torch map-style Dataset).
        store: the store directory to create, or an object-store URL (staged locally, uploaded
            shard by shard, the manifest last; ``options.storage_options`` reach it).
        options: the shared options; ``workers``: processes running ``__getitem__`` (``None``:
            the usable cores; ``0``: this process); ``progress`` counts samples.
        names: column names for the positions of tuple samples (default ``"0"``, ``"1"``, ...).
        schema: column types to use instead of inferring them, for some or all fields
            (e.g. ``{"tokens": stoker.Sequence("int32")}`` for a length that varies).
        on_error: ``"raise"`` stops at the first failing index with a SampleError naming it;
            ``"skip"`` leaves failing samples out and counts them (manifest metadata ``skipped``).
        chunk_size: samples per worker task.

    An interrupted or failed conversion keeps its finished shards; calling again with the same
    dataset resumes after them (see the module docstring). The result's ``report`` holds
    ``skipped_indices`` (the first 1000 indices left out, sorted).
    """
    _check_options(on_error, chunk_size, names)
    workers = usable_cores() if options.workers is None else options.workers
    n = len(dataset)
    if n == 0:
        raise EmptyDatasetError(f"the {type(dataset).__name__} has no samples; there is nothing to convert")
    url = is_remote(store)
    store = as_url(store) if url else Path(store)  # a URL keeps its scheme (pathlib folds s3:// to s3:/)
    if not url and Path(store).exists() and not options.overwrite:
        raise StoreExistsError(f"{store} exists; pass overwrite=True (--overwrite) to replace it", path=Path(store))
    staging = staging_dir(store)
    kind = type(dataset)
    source = {
        "kind": "dataset",
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "rows": n,
        "names": list(names) if names else None,
    }
    collate = Columnize(tuple(names) if names else None, dict(schema) if schema else None)
    guarded = Guarded(dataset)
    # the workers start first and read the fingerprint: this process never calls __getitem__
    pool = ProcessPool(_Task(guarded, collate, names, True), workers, stage="convert") if workers else None
    try:
        writer = options.writer(
            store, None, {"source": source}, staging=staging, fingerprint=_fingerprint_in(pool, dataset, names)
        )
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    try:
        skipped = _read_skipped(staging) if writer.rows_written else []
        start = resume_index(writer.rows_written, skipped)
        skipped = [k for k in skipped if k < start]
        _write_skipped(staging, skipped, append=False)
    except BaseException:
        writer.abort()
        if pool is not None:
            pool.close()
        raise
    if writer.rows_written:
        warnings.warn(
            ResumeWarning(
                f"resuming at row {writer.rows_written} (dataset index {start} of {n}) from the finished shards "
                f"in {staging} (delete it to start over)"
            ),
            stacklevel=4,
        )
    index_batches = (np.arange(a, min(a + chunk_size, n)) for a in range(start, n, chunk_size))
    if pool is None:
        produced: Iterator[dict[str, Any]] = (collate([guarded[int(i)] for i in idx]) for idx in index_batches)
    else:
        produced = pool.map(([int(i) for i in idx] for idx in index_batches), depth=2 * workers)
    bar = options.bar(n, f"dataset {kind.__name__}", unit="samples", initial=start)
    try:
        with bar:
            for out in produced:
                failed: list[Failure] = out["failed"]
                if failed:
                    if on_error == "raise":
                        raise _sample_error(failed[0], staging)
                    _write_skipped(staging, [f.index for f in failed], append=True)
                    skipped.extend(f.index for f in failed)
                    bar.set_postfix(skipped=len(skipped))
                if len(out["index"]):
                    _add(writer, out)
                bar.update(len(out["index"]) + len(failed))
        if not writer.rows_written:
            raise EmptyDatasetError(f"every one of the {n} samples failed and was skipped; nothing to write")
        kept = sorted(skipped)[:KEEP_SKIPPED]
        writer.metadata["skipped"] = len(skipped)
        writer.metadata["skipped_indices"] = kept
        (staging / SKIPPED_NAME).unlink(missing_ok=True)
        rows = writer.rows_written
        writer.close()
    except BaseException:
        writer.abort()  # a staging writer keeps its finished shards for the next run
        raise
    finally:
        close = getattr(produced, "close", None)
        if close is not None:
            close()
        if pool is not None:
            pool.close()
    return ConvertResult(Path(store), rows, len(skipped), report={"skipped_indices": kept, "resumed_at": start})


def _add(writer: StoreWriter, out: dict[str, Any]) -> None:
    index: np.ndarray = out["index"]
    batch_schema: dict[str, Column] = out["schema"]
    if writer.schema is None:
        writer.schema = dict(batch_schema)
    check_fields(int(index[0]), writer.schema, batch_schema, None)
    before = writer.rows_written
    try:
        writer.add_batch(out["columns"])
    except SchemaError as exc:
        k = (exc.row - before) if exc.row is not None else 0
        at = int(index[min(max(k, 0), len(index) - 1)])
        raise SchemaError(f"dataset[{at}]: {exc}", row=at, column=exc.column) from exc


def _sample_error(failure: Failure, staging: Path) -> SampleError:
    err = SampleError(
        f"dataset[{failure.index}] raised {failure.type_name}: {failure.message} — finished shards are kept in "
        f"{staging}; fix the dataset and run again "
        "to resume, or pass on_error='skip' (--on-error skip) to leave failing samples out",
        index=failure.index,
    )
    err.__cause__ = failure.exception()
    if hasattr(err, "add_note"):
        err.add_note("stoker: traceback in the worker:\n" + failure.traceback)
    return err
