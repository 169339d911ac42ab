"""An ordered map over worker threads with bounded prefetch.

The heavy work of a batch (numpy gathers, Arrow reads, the Rust tokenizer, libjpeg-turbo,
torch copies) releases the GIL, so threads run it in parallel without the cost of moving
batches between processes. Threads start when iteration starts and are joined when it
ends, however it ends (exhausted, ``break``, an exception, Ctrl-C, the iterator dropped).
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import ctypes.util
import functools
import itertools
import os
import sys
from collections import deque
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import TypeVar

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


def ordered_map(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int,
    depth: int,
    stage: str = "worker",
    timeout: float | None = None,
) -> Generator[R, None, None]:
    """Yield ``fn(item)`` for each item, in order, computed by ``workers`` threads.

    At most ``depth`` items are in flight. ``workers=0`` runs ``fn`` in the calling thread.
    An exception raised by ``fn`` is re-raised here with a note naming ``stage`` and the
    batch; ``timeout`` (seconds, ``None`` for none) bounds the wait for one result.
    """
    if workers <= 0:
        for n, item in enumerate(items):
            try:
                yield fn(item)
            except Exception as exc:
                tag_error(exc, stage, n)
                raise
        return
    it = iter(items)
    pending: deque[cf.Future[R]] = deque()
    pool = cf.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix=f"stoker-{stage}", initializer=one_torch_thread_here
    )
    try:
        for item in itertools.islice(it, max(depth, 1)):
            pending.append(pool.submit(fn, item))
        n = 0
        while pending:
            fut = pending.popleft()
            try:
                result = fut.result(timeout=timeout)
            except cf.TimeoutError:
                raise WorkerError(
                    f"stage {stage!r}: batch {n} was not ready after timeout={timeout}s "
                    "(raise timeout, or look for a stuck read)",
                    stage=stage,
                    batch=n,
                ) from None
            except Exception as exc:
                tag_error(exc, stage, n)
                raise
            for item in itertools.islice(it, 1):  # the next item, if there is one
                pending.append(pool.submit(fn, item))
            yield result
            n += 1
    finally:
        for fut in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def default_workers(limit: int | None = None) -> int:
    """Worker threads to use when the user does not say: the usable cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores if limit is None else min(cores, limit))


__all__ = ["ordered_map", "tag_error", "default_workers", "one_torch_thread_here"]
