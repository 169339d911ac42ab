"""An ordered map over worker threads with bounded prefetch.

The heavy work of a batch (numpy gathers, Arrow reads, the Rust tokenizer, libjpeg-turbo,
torch copies) releases the GIL, so threads run it in parallel without the cost of moving
batches between processes. Threads start when iteration starts and are joined when it
ends, however it ends (exhausted, ``break``, an exception, Ctrl-C, the iterator dropped);
only a thread stuck past ``timeout`` is left behind, as a daemon. A caller may instead keep a
:class:`ThreadPool` between maps (``persistent_workers``: the executor stops it on ``close()``).

A running map can be resized (:class:`Knobs`): the online tuner (``pipeline/autotune.py``)
changes its worker count and its depth between results; threads are added at once, a retired
thread ends after the task it is running. Results still come in order, so the items and their
order never depend on the settings.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import functools
import itertools
import queue
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any, TypeVar

from stoker.errors import WorkerError

T = TypeVar("T")
R = TypeVar("R")


@functools.lru_cache(maxsize=1)
def _libgomp() -> ctypes.CDLL | None:
    import torch

    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    for path in (Path(torch.__file__).parent / "lib" / "libgomp.so.1", ctypes.util.find_library("gomp")):
        if path is None or (isinstance(path, Path) and not path.is_file()):
            continue
        try:
            return ctypes.CDLL(str(path))
        except OSError:
            continue
    return None


def one_torch_thread_here() -> bool:
    """Make torch ops called from *this* thread run single-threaded; other threads are untouched.

    Several loader threads each running torch ops with torch's own OpenMP team oversubscribe the
    cores. ``torch.set_num_threads`` would change the whole process, the user's training too;
    OpenMP's setting is per thread. Worker threads call this when they start. Returns whether it
    could be applied (torch built with OpenMP, libgomp found).
    """
    if "torch" not in sys.modules:  # nothing to tame if this process never loaded torch
        return False
    lib = _libgomp()
    if lib is None:
        return False
    import torch

    torch.get_num_threads()  # torch initializes this thread's OpenMP setting first...
    lib.omp_set_num_threads(1)  # ...then this thread alone goes down to one
    return torch.get_num_threads() == 1


def tag_error(exc: BaseException, stage: str, batch: int) -> None:
    """Say on ``exc`` which stage and batch raised it (shown under the traceback)."""
    if hasattr(exc, "add_note"):
        exc.add_note(f"stoker: raised in stage {stage!r} while producing batch {batch} of this epoch")


class _Slot:
    """One item's task and result, handed from a worker thread to the consumer.

    A lock taken at creation is released when the result (or the error) is in: the consumer waits
    by taking it, so a hand-off costs one lock release and one acquire, both in C.
    """

    __slots__ = ("fn", "item", "value", "error", "done", "cancelled", "_ready")

    def __init__(self, fn: Callable[[Any], Any], item: Any) -> None:
        self.fn: Callable[[Any], Any] | None = fn
        self.item = item
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = False  # the result or the error is in
        self.cancelled = False  # set by the consumer: a thread that has not started it skips it
        self._ready = threading.Lock()
        self._ready.acquire()

    def run(self) -> None:
        """Run the task in this (worker) thread unless it was cancelled, then wake the consumer."""
        fn, item = self.fn, self.item
        self.fn = self.item = None
        if not self.cancelled and fn is not None:
            try:
                self.value = fn(item)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
                self.error = exc
        del fn, item
        self.done = True
        self._ready.release()

    def wait(self, timeout: float | None) -> bool:
        """Block until the task ran, ``timeout`` seconds at most (None: no limit); whether it did."""
        return self.done or self._ready.acquire(True, -1 if timeout is None else timeout)

    def take(self) -> Any:
        """The result (after :meth:`wait` returned True); the task's error is raised instead."""
        error, value = self.error, self.value
        self.error = self.value = None  # the consumer alone holds the batch from here
        if error is not None:
            try:
                raise error
            finally:
                del error
        return value


class ThreadPool:
    """Daemon worker threads taking tasks (:class:`_Slot`) off one queue.

    Not ``concurrent.futures.ThreadPoolExecutor``: its threads are joined when the interpreter
    exits, so one stuck in a read that never returns would keep the process from exiting. A
    thread left behind after a timeout here is a daemon and ends with the process.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._tasks: queue.SimpleQueue[_Slot | None] = queue.SimpleQueue()
        self._exiting = threading.Event()  # the interpreter exits: queued tasks are skipped
        _POOLS.add(self)
        self._name = name
        self.threads: list[threading.Thread] = []
        self.size = 0  # threads serving, not counting those told to retire
        self.broken = False  # a thread of it was left behind in a task past its timeout: not to be reused
        self.resize(workers)

    def resize(self, workers: int) -> None:
        """Serve with ``workers`` threads from now on: start new ones, or tell some to end after the
        task they run (a retired thread takes its stop signal off the queue after the tasks already
        queued, so no task is dropped)."""
        workers = max(1, workers)
        while self.size < workers:
            t = threading.Thread(
                target=_serve, args=(self._tasks, self._exiting), name=f"{self._name}_{len(self.threads)}", daemon=True
            )
            self.threads.append(t)
            t.start()
            self.size += 1
        while self.size > workers:
            self._tasks.put(None)
            self.size -= 1

    def submit(self, fn: Callable[[Any], Any], item: Any) -> _Slot:
        slot = _Slot(fn, item)
        self._tasks.put(slot)
        return slot

    def stop(self, wait: float | None) -> list[threading.Thread]:
        """Tell every thread to stop after its current task; join them for at most ``wait`` seconds
        in all (None: until they end). Returns the threads still running."""
        for _ in range(self.size):  # the retired threads have theirs queued already
            self._tasks.put(None)
        self.size = 0
        deadline = None if wait is None else time.monotonic() + wait
        for t in self.threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return [t for t in self.threads if t.is_alive()]


def _serve(tasks: queue.SimpleQueue[_Slot | None], exiting: threading.Event) -> None:
    one_torch_thread_here()
    while True:
        task = tasks.get()
        if task is None or exiting.is_set():
            return
        task.run()
        del task


_POOLS: weakref.WeakSet[ThreadPool] = weakref.WeakSet()  # live pools, stopped at interpreter exit


@atexit.register
def _stop_at_exit() -> None:
    """Let worker threads finish the task in hand, skip the queued ones, before the interpreter tears
    down (a daemon thread still in a mapped shard or in torch then can abort the process)."""
    stop_for_exit(list(_POOLS))


def stop_for_exit(pools: list[ThreadPool], wait: float = 5.0) -> None:
    """Tell ``pools`` to skip their queued tasks and stop; join their threads, ``wait`` seconds in all."""
    for pool in pools:
        pool._exiting.set()
        for _ in pool.threads:
            pool._tasks.put(None)
    deadline = time.monotonic() + wait
    for pool in pools:
        for t in pool.threads:
            t.join(max(0.0, deadline - time.monotonic()))


class Knobs:
    """The settings of a running :func:`ordered_map` that another party changes between results, and
    what the map saw. Read by the map after each result it hands out (no lock: plain attribute
    stores are atomic under the GIL, and a change applies from the next result on).

    Attributes:
        workers: worker threads wanted (>= 1).
        depth: items in flight wanted (>= 1).
        ready: results already done when the consumer last asked for one (the queue's occupancy).
        in_flight: items in flight when the consumer last asked.
        threads: threads serving now (the map's count, after the last resize).
    """

    __slots__ = ("workers", "depth", "ready", "in_flight", "threads")

    def __init__(self, workers: int, depth: int) -> None:
        self.workers, self.depth = workers, depth
        self.ready = self.in_flight = self.threads = 0


def ordered_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int,
    depth: int,
    stage: str = "worker",
    timeout: float | None = None,
    knobs: Knobs | None = None,
    pool: ThreadPool | None = None,
) -> Generator[R, None, None]:
    """Yield ``fn(item)`` for each item, in order, computed by ``workers`` threads.

    At most ``depth`` items are in flight. ``workers=0`` runs ``fn`` in the calling thread.
    An exception raised by ``fn`` is re-raised here with a note naming ``stage`` and the
    batch. ``timeout`` (seconds, ``None`` for none) bounds the wait for one result: past it a
    :class:`~stoker.errors.WorkerError` is raised at once, and the thread stuck in ``fn`` is left
    behind (a daemon thread: Python cannot stop it; it ends with the process). Otherwise the
    threads are joined when the iteration ends (for at most ``timeout`` seconds when one is set).

    With ``knobs``, ``knobs.workers`` and ``knobs.depth`` replace ``workers`` and ``depth`` and are read
    again after each result: the pool grows or shrinks to them while it runs. A smaller depth takes
    effect as results are handed out (nothing in flight is dropped). At 0 workers the next items are
    read in the calling thread once those in flight are handed out (the threads stay, idle); no
    thread starts before one is wanted (a pass restart at 0 workers costs no thread's start and join).

    ``pool``: threads kept by the caller between maps (``persistent_workers``): used as they are
    (resized to the workers), never stopped here; the tasks of an abandoned map are cancelled, and
    after a timeout the pool is marked ``broken`` (its stuck thread) and stopped.
    """
    knobs = Knobs(workers, depth) if knobs is None else knobs
    it = iter(items)
    pending: deque[_Slot] = deque()
    own, timed_out, n = pool is None, False, 0
    try:
        while True:
            if not pending:  # nothing in flight: fill up on threads, or read one item here
                if knobs.workers <= 0:
                    here = list(itertools.islice(it, 1))
                    if not here:
                        return
                    knobs.ready = knobs.in_flight = knobs.threads = 0
                    yield _here(fn, here[0], stage, n)
                    n += 1
                    continue
                pool = _sized(pool, knobs.workers, stage)
                pending.extend(pool.submit(fn, i) for i in itertools.islice(it, max(1, knobs.depth)))
                if not pending:
                    return
            knobs.ready, knobs.in_flight = sum(s.done for s in pending), len(pending)
            knobs.threads = 0 if pool is None else pool.size
            slot = pending.popleft()
            if not slot.wait(timeout):
                timed_out = True
                pending.appendleft(slot)  # cancelled below with the others
                raise WorkerError(
                    f"stage {stage!r}: batch {n} was not ready after timeout={timeout}s; the worker thread "
                    "still running it is left behind as a daemon thread (a thread cannot be stopped from "
                    "outside; it ends with the process). Raise timeout=, or look for a read that blocks "
                    "(a network file system, a lock, an endless loop)",
                    stage=stage,
                    batch=n,
                )
            try:
                result = slot.take()
            except Exception as exc:
                tag_error(exc, stage, n)
                raise
            del slot
            if knobs.workers > 0:  # refill up to the depth; at 0 workers drain, then read here
                pool = _sized(pool, knobs.workers, stage)
                for item in itertools.islice(it, max(0, max(1, knobs.depth) - len(pending))):
                    pending.append(pool.submit(fn, item))
            yield result
            n += 1
    finally:
        for slot in pending:
            slot.cancelled = True
        if pool is not None and (own or timed_out):
            pool.broken = pool.broken or timed_out
            pool.stop(wait=0.0 if timed_out else timeout)


def _here(fn: Callable[[T], R], item: T, stage: str, n: int) -> R:
    """``fn(item)`` in the calling thread, its error tagged with ``stage`` and batch ``n``."""
    try:
        return fn(item)
    except Exception as exc:
        tag_error(exc, stage, n)
        raise


def _sized(pool: ThreadPool | None, workers: int, stage: str) -> ThreadPool:
    """``pool`` resized to ``workers`` threads, or a new pool of them."""
    if pool is None:
        return ThreadPool(workers, f"stoker-{stage}")
    if workers != pool.size:
        pool.resize(workers)
    return pool


__all__ = ["Knobs", "ThreadPool", "ordered_map", "tag_error", "one_torch_thread_here"]
