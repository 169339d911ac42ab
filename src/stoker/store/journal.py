"""The journal of a resumable write: which shards a staging directory holds, for what input.

``StoreWriter(staging=DIR)`` writes ``DIR/journal.json`` atomically after every finished
shard; a writer opened later on the same ``DIR`` reads it back with :func:`read_journal`,
which checks that the input (``metadata`` and the content ``fingerprint``) and schema match
and that every shard is intact, and removes a shard left half-written by the run that stopped.

Only one writer works in a staging directory at a time: :func:`lock_staging` takes an
exclusive ``flock`` on ``DIR/.lock`` (holding the writer's pid and start time) for the whole
write. The kernel drops it when the process exits, however it exits; processes forked while
it is held close their copy at once, so a killed writer's workers never keep it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, SchemaError, StoreError, StoreWriteError
from stoker.store.format import Column, ShardInfo

JOURNAL_NAME = "journal.json"
LOCK_NAME = ".lock"
Fingerprint = Mapping[str, "str | None"]  # sample index -> hash of its content (None: failed or not reproducible)

_held: set[int] = set()  # lock fds this process holds: closed in children forked while held
_fork_hook: list[bool] = []  # one os.register_at_fork per process


class OtherInputError(ConfigError):
    """A staging directory holds the partial write of another input (``overwrite=True`` starts over)."""


def _close_held_in_child() -> None:
    for fd in list(_held):
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(info['pid'])}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "pid unknown: it is just starting"


def lock_staging(staging: Path) -> int:
    """Create ``staging`` and take the exclusive lock on it; the lock's fd (give it to :func:`unlock_staging`).

    Raises StoreError naming the running writer (pid, start time) when another process holds it.
    """
    lock = staging / LOCK_NAME
    for _ in range(100):
        staging.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreError(
                f"{staging} is in use by another conversion into the same store ({holder}); wait for it to finish "
                "or stop it, then run again (it resumes from the finished shards)",
                path=staging,
            ) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:  # the directory was moved into place by the writer that just finished
            same = False
        if same:
            break
        os.close(fd)
    else:
        raise StoreError(f"could not lock {lock}: it keeps being replaced; run again", path=staging)
    started = time.strftime("%Y-%m-%d %H:%M:%S %z")
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "started": started}).encode(), 0)
    if not _fork_hook:
        os.register_at_fork(after_in_child=_close_held_in_child)
        _fork_hook.append(True)
    _held.add(fd)
    return fd


def unlock_staging(fd: int) -> None:
    """Release a lock taken by :func:`lock_staging`."""
    _held.discard(fd)
    os.close(fd)


def write_journal(
    staging: Path,
    schema: dict[str, Column],
    shards: list[ShardInfo],
    metadata: dict[str, Any],
    fingerprint: Fingerprint | None = None,
) -> None:
    """Record ``shards`` in ``staging``'s journal (written to a part file, synced, then renamed).

    A failed write (disk full) is a StoreWriteError naming the file.
    """
    obj = {
        "columns": {name: col.to_json() for name, col in schema.items()},
        "shards": [s.to_json() for s in shards],
        "metadata": metadata,
        "fingerprint": None if fingerprint is None else dict(fingerprint),
    }
    part = staging / (JOURNAL_NAME + ".part")
    try:
        with open(part, "w", encoding="utf-8") as f:
            json.dump(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, staging / JOURNAL_NAME)
    except OSError as exc:  # disk full: a StoreWriteError naming the file, as shard and manifest writes give
        raise StoreWriteError.from_os_error(exc, part) from exc


def read_journal(
    staging: Path, metadata: dict[str, Any], schema: dict[str, Column] | None, fingerprint: Fingerprint | None = None
) -> tuple[dict[str, Column], list[ShardInfo]]:
    """The schema and finished shards a staging directory holds for this input.

    Raises OtherInputError when it holds other input: other ``metadata``, or a ``fingerprint``
    with a sample hashed by both runs whose hashes differ (see :func:`fingerprints_differ`).
    """
    journal = staging / JOURNAL_NAME
    try:
        obj = json.loads(journal.read_text(encoding="utf-8"))
        stored = {str(k): Column.from_json(v) for k, v in obj["columns"].items()}
        shards = [ShardInfo.from_json(s) for s in obj["shards"]]
        started_with = obj["metadata"]
        recorded = obj.get("fingerprint")
    except (OSError, ValueError, KeyError, TypeError, SchemaError) as exc:
        raise ConfigError(f"{journal} is unreadable ({exc}); delete {staging} to start over", option="staging") from exc
    start_over = "pass overwrite=True (--overwrite) to start over, or delete it"
    if started_with != metadata:
        raise OtherInputError(
            f"{staging} holds a partial write of other input (its metadata {started_with!r:.200} differs "
            f"from {metadata!r:.200}); {start_over}",
            option="staging",
        )
    if fingerprint is not None:
        differ = fingerprints_differ(recorded, fingerprint)
        if differ is not None:
            raise OtherInputError(
                f"{staging} holds the finished shards of another dataset's conversion: sample {differ} of this "
                f"dataset differs from the one converted there, though its type, length and fields are the same; "
                f"resuming would mix two datasets in one store; {start_over}",
                option="staging",
            )
    if schema is not None and schema != stored:
        raise SchemaError(
            f"{staging} was started with schema {stored}, this writer declares {schema}; delete it to start over"
        )
    for info in shards:
        shard = staging / info.file
        if not shard.is_file() or shard.stat().st_size != info.bytes:
            raise ConfigError(f"{shard} is missing or altered; delete {staging} to start over", option="staging")
    known = {info.file for info in shards} | {JOURNAL_NAME}
    for leftover in staging.iterdir():  # a shard being written when the last run stopped
        if leftover.name not in known and re.fullmatch(r"shard-\d+\.arrow(\.part)?", leftover.name):
            leftover.unlink()
    return stored, shards


def resume_staging(
    staging: Path,
    metadata: dict[str, Any],
    schema: dict[str, Column] | None,
    fingerprint: Fingerprint | None,
    overwrite: bool,
) -> tuple[dict[str, Column], list[ShardInfo]] | None:
    """What a writer opened on ``staging`` continues from: its schema and finished shards, or None
    when there is no journal. A journal of other input raises :class:`OtherInputError`, unless
    ``overwrite``: then the writer's own files there (journal, manifest, shards) are deleted and
    the writer starts over (None)."""
    if not (staging / JOURNAL_NAME).is_file():
        return None
    try:
        return read_journal(staging, metadata, schema, fingerprint)
    except OtherInputError:
        if not overwrite:
            raise
    for entry in staging.iterdir():  # start over: this writer's own files only
        if entry.name in (JOURNAL_NAME, JOURNAL_NAME + ".part", "manifest.json") or re.fullmatch(
            r"shard-\d+\.arrow(\.part)?", entry.name
        ):
            entry.unlink()
    return None


def fingerprints_differ(recorded: Any, current: Fingerprint) -> str | None:
    """The first sample index whose content hash differs between two fingerprints, or None when none does.

    Only samples hashed by both (not failed, reproducible) are compared; a journal without a
    fingerprint (or an unreadable one) differs at ``"?"``.
    """
    if not isinstance(recorded, Mapping):
        return "?"
    for index, digest in current.items():
        if digest is not None and recorded.get(index) is not None and recorded[index] != digest:
            return index
    return None
