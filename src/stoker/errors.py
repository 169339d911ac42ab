"""Every exception stoker raises on purpose.

The tree::

    StokerError                         base of everything below
    ├── StoreError                      a store on disk cannot be used
    │   ├── StoreNotFoundError          the path does not exist (also FileNotFoundError)
    │   ├── StoreExistsError            writing over an existing path without overwrite=True
    │   │                               (also FileExistsError)
    │   ├── ManifestError               manifest.json missing, unreadable or inconsistent
    │   ├── ShardError                  a shard is missing, truncated, altered, unreadable or
    │   │                               outside the store directory
    │   └── StoreWriteError             a store file could not be written: disk full, no
    │                                   permission (also OSError, with errno and filename)
    ├── SchemaError                     data does not fit the schema (also ValueError)
    ├── InputError                      a source file cannot be read as asked: bad encoding,
    │                                   a missing column, a malformed line (also ValueError)
    ├── EmptyDatasetError               nothing to write or to load (also ValueError)
    ├── ConfigError                     an invalid option (also ValueError)
    ├── StateError                      a state_dict that does not fit this loader (also ValueError)
    ├── SampleError                     a Dataset's __getitem__ raised while converting it into a
    │                                   store; ``index`` names the sample, the original error is
    │                                   its ``__cause__`` when it could be sent back
    ├── WorkerError                     a worker failed in a way that cannot be re-raised as
    │                                   the original exception (it died, or its exception
    │                                   could not be sent back, or it timed out)
    └── ConcurrentIterationError        a second pass over one loader began while a pass ran in
                                        another thread (also RuntimeError)

Two more extend it where they are raised: ``stoker.vision.ImageError`` (a StokerError and a
ValueError: an image that cannot be read, decoded or cropped; ``vision/errors.py``) and
``OtherInputError`` (a ConfigError: a staging directory holding another input's partial write;
``store/journal.py``).

Exceptions raised by user code inside a worker (a ``Dataset.__getitem__``, a ``collate_fn``)
are re-raised in the consumer as the original exception type, with a note naming the stage
and the batch, so ``except KeyError`` in user code keeps working.

Every message says what went wrong, where (file, row, column or stage) and what to do.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "StokerError",
    "StoreError",
    "StoreNotFoundError",
    "StoreExistsError",
    "ManifestError",
    "ShardError",
    "StoreWriteError",
    "SchemaError",
    "InputError",
    "EmptyDatasetError",
    "ConfigError",
    "StateError",
    "SampleError",
    "WorkerError",
    "ConcurrentIterationError",
]


class StokerError(Exception):
    """Base class of every error stoker raises on purpose."""


class StoreError(StokerError):
    """A store on disk cannot be used. ``path`` names the file or directory at fault."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The store path does not exist."""


class StoreExistsError(StoreError, FileExistsError):
    """The destination of a write exists and ``overwrite`` was not given."""


class ManifestError(StoreError):
    """manifest.json is missing, unreadable, of an unknown version or inconsistent."""


class ShardError(StoreError):
    """A shard file is missing, truncated, altered (checksum) or not Arrow IPC."""


class StoreWriteError(StoreError, OSError):
    """A file of a store could not be written (disk full, no permission, read-only file system).

    ``path`` and ``filename`` name the file, ``errno`` is the system's error number.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, errno: int | None = None) -> None:
        super().__init__(message, path=path)
        self.errno = errno
        self.filename = None if path is None else str(path)

    def __str__(self) -> str:
        return str(self.args[0])  # the message, not OSError's "[Errno n] strerror: filename"

    @classmethod
    def from_os_error(cls, exc: OSError, path: str | Path) -> StoreWriteError:
        """The error of writing ``path`` that failed with ``exc``, saying what to do."""
        hint = {28: "free space on that file system, or write the store elsewhere", 13: "check its permissions"}
        what = hint.get(exc.errno or 0, "check the file system")
        return cls(f"cannot write {path}: {exc.strerror or exc} ({what})", path=path, errno=exc.errno)


class SchemaError(StokerError, ValueError):
    """Data does not fit the schema. ``row`` and ``column`` say where, when known."""

    def __init__(self, message: str, *, row: int | None = None, column: str | None = None) -> None:
        super().__init__(message)
        self.row = row
        self.column = column


class InputError(StokerError, ValueError):
    """A source file (text, JSONL, CSV, ...) cannot be read as asked.

    ``path`` names the file and ``line`` the 1-based line at fault, when known.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)
        self.line = line


class EmptyDatasetError(StokerError, ValueError):
    """There is nothing to write or to load."""


class ConfigError(StokerError, ValueError):
    """An option has an invalid value. ``option`` names it."""

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class StateError(StokerError, ValueError):
    """A state_dict does not fit the loader it is loaded into."""


class SampleError(StokerError):
    """A Dataset raised at one index while being converted into a store.

    ``index`` is the sample; the message names the original exception and says how to go on
    (fix it and run again to resume, or skip failing samples with ``on_error="skip"``).
    """

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class WorkerError(StokerError):
    """A worker died or failed in a way that cannot be re-raised as the original exception.

    ``stage`` names the pipeline stage and ``batch`` the batch number within the epoch.
    """

    def __init__(self, message: str, *, stage: str | None = None, batch: int | None = None) -> None:
        super().__init__(message)
        self.stage = stage
        self.batch = batch


class ConcurrentIterationError(StokerError, RuntimeError):
    """A pass over a loader (or a worker pool) began while another pass over it ran in another thread.

    One loader serves one pass at a time; use one loader per thread.
    """
