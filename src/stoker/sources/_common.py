"""Helpers shared by the sources: per-thread handles, dtype and length checks."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from stoker.errors import ConfigError, SchemaError

H = TypeVar("H")


class PerThread(Generic[H]):
    """One handle per thread and per process, opened on first use.

    ``get()`` returns this thread's handle, opening it with ``opener()`` the first time, and
    again after a fork (the pid is checked: a handle inherited from the parent is never used).
    ``close()`` closes every handle this object opened in this process. Pickling drops the
    handles, so a source can travel to a spawned process and reopen there.
    """

    def __init__(self, opener: Callable[[], H], closer: Callable[[H], None]) -> None:
        self._opener = opener
        self._closer = closer
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[tuple[int, H]] = []

    def get(self) -> H:
        pid = os.getpid()
        entry = getattr(self._local, "entry", None)
        if entry is None or entry[0] != pid:
            handle = self._opener()
            entry = (pid, handle)
            self._local.entry = entry
            with self._lock:
                self._opened.append(entry)
        return entry[1]

    def close(self) -> None:
        pid = os.getpid()
        with self._lock:
            mine = [h for p, h in self._opened if p == pid]
            self._opened = []
        for handle in mine:
            self._closer(handle)
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        return {"_opener": self._opener, "_closer": self._closer}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_opener"], state["_closer"])  # type: ignore[misc]


def check_numeric(dtype: np.dtype, where: str, what_to_do: str) -> np.dtype:
    """``dtype`` if it holds plain numbers, else a SchemaError saying ``where`` and ``what_to_do``."""
    if dtype.hasobject or dtype.fields is not None or dtype.kind not in "biufc":
        raise SchemaError(
            f"{where} has dtype {dtype} (object, variable-length, string or compound values), which cannot be "
            f"stored or batched as numbers; {what_to_do}",
            column=where,
        )
    return dtype


def check_lengths(lengths: dict[str, int], where: str) -> int:
    """The common length of the columns, or a SchemaError listing them."""
    if not lengths:
        raise ConfigError(f"{where}: no columns were given", option="keys")
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}: {v}" for k, v in lengths.items())
        raise SchemaError(
            f"{where}: the columns have different numbers of rows ({detail}); every column needs one value per row"
        )
    return next(iter(lengths.values()))
