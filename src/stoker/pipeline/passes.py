"""One pass at a time: the guard that refuses a second, concurrent pass over one loader.

A loader's pass holds its worker pool, its prefetched batches and its position (``state_dict``),
so two threads iterating one loader at once would deadlock on the pool or garble the position.
:class:`OnePass` takes a non-blocking lock when a pass starts and gives it back when the pass ends
(exhausted, failed, closed or garbage-collected). A new pass that finds the lock taken:

- closes the previous pass when that pass was last advanced by this same thread, or by a thread
  that has ended: it was abandoned (each pass takes its own epoch, so nothing of it is lost);
- otherwise raises :class:`~stoker.errors.ConcurrentIterationError` at once.

A pass closed that way raises ``ConcurrentIterationError`` if it is advanced again, rather than
ending quietly as if its epoch were complete.

A pass belongs to the process that started it: its worker processes, queues and shared-memory
slots are that process's. After ``fork()`` the child's copy of a pass raises
``ConcurrentIterationError`` when advanced (it would take the parent's batches off their shared
queue and leave the parent waiting forever) and is dropped without touching the parent's workers;
a new pass in the child starts its own.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Generator, Iterator
from typing import Any

from stoker.errors import ConcurrentIterationError


class Pass(Iterator[Any]):
    """One pass: the generator of its batches, the lock it holds, the thread that last advanced it."""

    def __init__(self, guard: OnePass, batches: Generator[Any, None, None]) -> None:
        self._guard = guard
        self._batches: Generator[Any, None, None] | None = batches
        self._holds = True
        self._superseded = False
        self._closing = threading.Lock()
        self.thread = threading.current_thread()
        self.pid = os.getpid()

    def __iter__(self) -> Pass:
        return self

    def __next__(self) -> Any:
        if self.pid != os.getpid():
            raise ConcurrentIterationError(
                f"this pass over {self._guard.what} was started in process {self.pid}, and this is process "
                f"{os.getpid()} (a fork() of it): its workers and prefetched batches are that process's; start "
                "a new pass here (for batch in loader), or build the loader after the fork"
            )
        batches = self._batches
        if batches is None:
            if self._superseded:
                raise ConcurrentIterationError(
                    f"this pass over {self._guard.what} was closed because a new pass over it started; "
                    "passes over one loader do not nest or interleave: use one loader per pass you keep open"
                )
            raise StopIteration
        self.thread = threading.current_thread()
        try:
            return next(batches)
        except BaseException:
            self.close()
            raise

    def close(self, superseded: bool = False) -> None:
        """End the pass (its workers stop, its buffers go back) and release the guard. Idempotent.
        In a forked child, only drops the child's copy (the parent's pass goes on)."""
        if self.pid != os.getpid():
            self._batches = None
            return
        with self._closing:
            batches = self._batches
            if batches is not None and _running(batches):
                raise ConcurrentIterationError(f"this pass over {self._guard.what} is running in another thread")
            self._batches = None
            try:
                if batches is not None:
                    self._superseded = superseded
                    batches.close()
            finally:
                if self._holds:
                    self._holds = False
                    self._guard.lock.release()

    def abandoned(self) -> bool:
        """Whether the pass is idle and the thread that last advanced it is the calling thread or has ended."""
        batches = self._batches
        if batches is not None and _running(batches):
            return False
        return self.thread is threading.current_thread() or not self.thread.is_alive()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to during collection
            pass


def _running(batches: Generator[Any, None, None]) -> bool:
    """Whether a thread is inside the generator right now."""
    return bool(getattr(batches, "gi_running", False))


class OnePass:
    """Hands out :class:`Pass` objects over one loader, one at a time (see the module docstring)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.lock = threading.Lock()
        self._current: weakref.ref[Pass] | None = None

    def start(self, batches: Callable[[], Generator[Any, None, None]]) -> Pass:
        """Begin a pass over the generator ``batches()`` makes, closing an abandoned previous one."""
        previous = self._current() if self._current is not None else None
        if previous is not None and previous.pid != os.getpid():  # a fork()'s child: the parent's pass is not ours
            previous.close()
            self.lock, self._current = threading.Lock(), None
        if not self.lock.acquire(blocking=False):
            previous = self._current() if self._current is not None else None
            if previous is not None and previous.abandoned():
                try:
                    previous.close(superseded=True)
                except ConcurrentIterationError:  # another thread took it up in the meantime
                    pass
            if not self.lock.acquire(blocking=False):
                raise ConcurrentIterationError(
                    f"{self.what} is being iterated in another thread; one loader serves one pass at a time: "
                    "create one loader per thread (or finish the other pass first)"
                )
        try:
            current = Pass(self, batches())
        except BaseException:
            self.lock.release()
            raise
        self._current = weakref.ref(current)
        return current


__all__ = ["OnePass", "Pass"]
