"""The options every conversion shares (:class:`ConvertOptions`) and what each returns (:class:`ConvertResult`).

Each ``stoker.convert.KIND`` function takes the six shared options as keywords, with the
same names and meanings for every kind, builds one :class:`ConvertOptions` (which validates
them) and returns one :class:`ConvertResult`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stoker import stores
from stoker.errors import ConfigError
from stoker.remote.location import remote_kwargs
from stoker.store.writer import DEFAULT_SHARD_SIZE, StoreWriter, parse_size

Progress = bool | Callable[[int], None] | None


@dataclass(frozen=True)
class ConvertOptions:
    """The options shared by every conversion, validated when built.

    Attributes:
        overwrite: replace the store if it exists (otherwise StoreExistsError).
        shard_size: upper bound of a shard's data, bytes or a string like ``"256MB"``; kept as bytes.
        progress: ``None``: a progress bar on stderr when stderr is a terminal; ``True``/``False``:
            a bar always / never; a callable: called with the number of items done since its last
            call (rows, files or samples), instead of a bar.
        workers: parallel workers (``None``: the kind's default); what a worker is depends on the
            kind: tokenizing or decoding threads, shard-writing threads, Dataset processes.
            ``0`` runs the work in the calling thread where the kind allows it.
        metadata: JSON-serializable entries added to the store manifest's metadata.
        storage_options: for a store written to an object-store URL: credentials, endpoint (fsspec's
            keys, e.g. ``{"key": ..., "secret": ..., "endpoint_url": ...}``); refused for a local path.
            Without them the client's usual places are read (the environment, profiles).
    """

    overwrite: bool = False
    shard_size: int | str = DEFAULT_SHARD_SIZE
    progress: Progress = None
    workers: int | None = None
    metadata: Mapping[str, Any] | None = None
    storage_options: Mapping[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.overwrite, bool):
            raise ConfigError(f"overwrite must be True or False, not {self.overwrite!r}", option="overwrite")
        object.__setattr__(self, "shard_size", parse_size(self.shard_size))
        if not (self.progress is None or isinstance(self.progress, bool) or callable(self.progress)):
            raise ConfigError(
                f"progress must be None, True, False or a callable taking a count, not {self.progress!r}",
                option="progress",
            )
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0
        ):
            raise ConfigError(f"workers must be an integer >= 0 or None, not {self.workers!r}", option="workers")
        if self.metadata is not None:
            if not isinstance(self.metadata, Mapping) or not all(isinstance(k, str) for k in self.metadata):
                raise ConfigError(
                    f"metadata must be a mapping with string keys, not {self.metadata!r}", option="metadata"
                )
            try:
                json.dumps(dict(self.metadata))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"metadata must be JSON-serializable: {exc}", option="metadata") from exc
            object.__setattr__(self, "metadata", dict(self.metadata))
        if self.storage_options is not None:
            if not isinstance(self.storage_options, Mapping):
                raise ConfigError(
                    f"storage_options must be a mapping, not {type(self.storage_options).__name__}",
                    option="storage_options",
                )
            object.__setattr__(self, "storage_options", dict(self.storage_options))

    def writer(
        self, store: str | os.PathLike[str], schema: Any, metadata: Mapping[str, Any], **keywords: Any
    ) -> StoreWriter:
        """A ``StoreWriter`` of ``store`` with these options: shard size, overwrite, ``metadata`` (what the
        conversion records) updated with the user's, ``storage_options``; ``keywords`` add to or replace them."""
        options: dict[str, Any] = {"shard_size": self.shard_size, "overwrite": self.overwrite}
        # storage_options reach a URL's RemoteStoreWriter (a ConfigError for a local store)
        options.update(metadata=self.with_metadata(metadata), **remote_kwargs(store, self.storage_options), **keywords)
        return stores.StoreWriter(store, schema, **options)  # a URL gets a RemoteStoreWriter

    def with_metadata(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` (what the conversion records about its input) updated with the user's ``metadata``."""
        return {**base, **(self.metadata or {})}

    def bar(self, total: int | None, desc: str, unit: str = "rows", initial: int = 0) -> Any:
        """A progress reporter with ``update(n)``, ``set_postfix(**kw)`` and ``with``: a tqdm bar or the callable."""
        if callable(self.progress):
            return _Callback(self.progress)
        from tqdm.auto import tqdm

        disable = (not sys.stderr.isatty()) if self.progress is None else not self.progress
        return tqdm(
            total=total,
            initial=initial,
            desc=desc,
            unit=unit,
            unit_scale=True,
            disable=disable,
            file=sys.stderr,
            dynamic_ncols=True,
        )


class _Callback:
    """``progress=callable`` in the shape of a tqdm bar: ``update(n)`` calls it with ``n``."""

    def __init__(self, fn: Callable[[int], None]) -> None:
        self._fn = fn

    def update(self, n: int = 1) -> None:
        if n:
            self._fn(int(n))

    def set_postfix(self, **_: Any) -> None:
        """Bars show extra counts; a callable is told only of items done."""

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> _Callback:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion wrote.

    A result is ``os.PathLike``: pass it where the store's path goes (``stoker.open(result)``).

    Attributes:
        path: the store written.
        rows: rows in the store.
        skipped: inputs left out (bad images or samples with ``on_error="skip"``, empty text lines).
        report: facts about the input, by kind (see each ``stoker.convert`` function).
        seconds: wall time of the conversion.
    """

    path: Path
    rows: int
    skipped: int = 0
    report: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        text = f"{self.rows:,} rows -> {self.path} in {self.seconds:.1f} s"
        return text + (f"; {self.skipped:,} skipped" if self.skipped else "")


__all__ = ["ConvertOptions", "ConvertResult", "Progress"]
