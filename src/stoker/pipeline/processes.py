"""Process workers for user Python that must run in parallel (a Dataset's ``__getitem__``).

A :class:`ProcessPool` runs one function over tasks in worker processes. Each worker calls it
on a task and writes every array of the result into one shared-memory segment; only a small
description (names, dtypes, shapes, offsets) travels through the result queue. The consumer
opens the segment, unlinks it at once, copies the arrays out and rebuilds the result. Segments
are named ``stoker_<token>_<generation>_<task>`` (the token starts with the consumer's pid).

Nothing outlives the consumer: each worker watches its parent *process* (``getppid`` polled by a
daemon thread; ``PR_SET_PDEATHSIG`` is not used, as it fires when the *thread* that started the
worker ends) and, when the consumer is gone, unlinks every segment of its pool not yet taken and
exits. A worker that fails while writing a segment unlinks it. Closing the pool sweeps what a
killed worker left, and a new pool sweeps segments whose consumer pid is gone.
"""

from __future__ import annotations

import glob
import multiprocessing as mp
import os
import pickle
import queue
import secrets
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from stoker.errors import ConcurrentIterationError, WorkerError
from stoker.pipeline.collate import default_collate, fetch, flatten
from stoker.pipeline.segments import read_segment, sweep_stale_segments, unlink_segment, write_segment
from stoker.pipeline.threads import tag_error

_POLL = 0.5  # seconds between liveness checks while waiting for a result
_WATCH = 0.2  # seconds between a worker's checks that its consumer process is still there
_END = object()


# -- the worker ---------------------------------------------------------------------------------
def _watch_parent(parent: int, token: str, writing: threading.Lock) -> None:
    """End this worker when its consumer process ``parent`` is gone, unlinking its pool's segments.

    A daemon thread polls ``getppid()`` (a dead parent's children are re-parented). It then takes
    ``writing`` (held while a segment is made and sent) so no segment is made after the sweep.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH)
        writing.acquire(timeout=10.0)
        for path in glob.glob(f"/dev/shm/stoker_{token}_*"):
            try:
                os.unlink(path)
            except OSError:
                pass
        os._exit(1)

    threading.Thread(target=watch, name="stoker-watch-consumer", daemon=True).start()


class FetchCollate:
    """``dataset[i]`` for the indices of one batch, then the collate: a task of :func:`process_map`."""

    def __init__(self, dataset: Any, collate_fn: Callable | None = None) -> None:
        self.dataset = dataset
        self.collate_fn = collate_fn or default_collate

    def __call__(self, indices: Any) -> Any:
        return self.collate_fn(fetch(self.dataset, [int(i) for i in indices]))


def _worker(fn: Callable[[Any], Any], token: str, parent: int, tasks: Any, results: Any, current: Any) -> None:
    writing = threading.Lock()
    _watch_parent(parent, token, writing)
    while True:
        task = tasks.get()
        if task is None:
            return
        gen, n, payload = task
        if gen != current.value:  # the consumer abandoned that iteration
            continue
        try:
            leaves, spec = flatten(fn(payload))
            name = f"stoker_{token}_{gen}_{n}"
            with writing:
                layout, has_segment = write_segment(name, leaves)
                results.put((gen, n, "ok", (name if has_segment else None, layout, spec)))
        except Exception as exc:  # noqa: BLE001 - sent back and re-raised in the consumer
            try:
                payload = pickle.dumps(exc)
            except Exception:  # noqa: BLE001
                payload = None
            results.put((gen, n, "error", (payload, traceback.format_exc())))


# -- the consumer -------------------------------------------------------------------------------
class ProcessPool:
    """Worker processes that run ``fn(task)`` and send the results back through shared memory.

    ``fn`` reaches the workers by fork (or by pickling where fork is missing); its result may be
    any nest of dicts, lists and tuples of numpy arrays and small objects. Processes start on the
    first :meth:`map` and stay until :meth:`close`, so one pool can serve many epochs
    (``persistent_workers``). Every :meth:`map` call is a new *generation*: results of an
    abandoned one (the user broke out of the loop) are dropped and their segments unlinked.
    """

    def __init__(self, fn: Callable[[Any], Any], workers: int, stage: str = "dataset") -> None:
        self.fn = fn
        self.workers = workers
        self.stage = stage
        self.token = f"{os.getpid()}_{secrets.token_hex(4)}"
        self._procs: list[Any] = []
        self._tasks: list[Any] = []
        self._results: Any = None
        self._current: Any = None
        self._generation = 0
        self._serving = threading.Lock()  # held by the one map() in progress
        self._oom_kills: int | None = None

    def _start(self) -> None:
        sweep_stale_segments()
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
        self._tasks = [ctx.Queue() for _ in range(self.workers)]
        self._results = ctx.Queue()
        self._current = ctx.Value("q", 0, lock=False)
        self._oom_kills = oom_kills()
        self._procs = [
            ctx.Process(
                target=_worker,
                args=(self.fn, self.token, os.getpid(), self._tasks[w], self._results, self._current),
                daemon=True,
                name=f"stoker-{self.stage}-{w}",
            )
            for w in range(self.workers)
        ]
        for p in self._procs:
            p.start()

    def map(self, tasks: Iterable[Any], *, depth: int, timeout: float | None = None) -> Iterator[Any]:
        """Yield ``fn(task)`` for each of ``tasks``, in order, at most ``depth`` in flight."""
        if not self._serving.acquire(blocking=False):
            raise ConcurrentIterationError(
                f"the {self.stage!r} worker pool is already serving an iteration (in another thread, or one "
                "not closed yet); iterate one loader from one thread at a time, or use one loader per thread"
            )
        try:
            if not self._procs:
                self._start()
        except BaseException:
            self._serving.release()
            raise
        self._generation += 1
        gen = self._current.value = self._generation
        it = iter(tasks)
        sent = received = 0
        ready: dict[int, Any] = {}

        def send_next() -> bool:
            nonlocal sent
            task = next(it, _END)
            if task is _END:
                return False
            self._tasks[sent % self.workers].put((gen, sent, task))
            sent += 1
            return True

        try:
            while sent < max(depth, self.workers) and send_next():
                pass
            while received < sent:
                while received not in ready:
                    g, n, status, payload = _get(
                        self._results, self._procs, timeout, self.stage, received, self._oom_kills
                    )
                    if g != gen:  # left over from an abandoned iteration
                        _discard(status, payload)
                        continue
                    if status == "error":
                        raise _rebuild_error(payload, self.stage, n)
                    ready[n] = payload
                batch = read_segment(*ready.pop(received))
                received += 1
                send_next()
                yield batch
        except GeneratorExit:  # the user left the loop: workers skip the rest of this generation
            raise
        except BaseException:
            self.close()  # a failed or interrupted pool is not reused
            raise
        finally:
            for status_payload in ready.values():
                _discard("ok", status_payload)
            self._serving.release()

    def close(self) -> None:
        """Stop the workers and unlink every segment this pool made. Safe to call twice."""
        if self._procs:
            _shutdown(self._procs, self._tasks, self._results)
            self._procs, self._tasks, self._results = [], [], None
        for path in glob.glob(f"/dev/shm/stoker_{self.token}_*"):
            unlink_segment(os.path.basename(path))


def process_map(
    dataset: Any,
    batches: Iterable[np.ndarray],
    *,
    workers: int,
    depth: int,
    collate_fn: Callable | None = None,
    timeout: float | None = None,
    stage: str = "dataset",
) -> Iterator[Any]:
    """Yield collated batches of ``dataset`` rows, in order, from a pool that lives for this call."""
    pool = ProcessPool(FetchCollate(dataset, collate_fn), workers, stage)
    try:
        yield from pool.map(([int(i) for i in idx] for idx in batches), depth=depth, timeout=timeout)
    finally:
        pool.close()


def _discard(status: str, payload: Any) -> None:
    if status == "ok" and payload[0]:
        unlink_segment(payload[0])


def _get(results: Any, procs: list[Any], timeout: float | None, stage: str, batch: int, oom_before: int | None) -> Any:
    waited = 0.0
    while True:
        try:
            return results.get(timeout=_POLL)
        except queue.Empty:
            waited += _POLL
            dead = [p for p in procs if not p.is_alive()]
            if dead:
                p = dead[0]
                raise WorkerError(
                    f"worker {p.name} of stage {stage!r} {exit_words(p.exitcode, oom_before)} while producing batch "
                    f"{batch}; the pool is closed, start a new iteration to go on",
                    stage=stage,
                    batch=batch,
                ) from None
            if timeout and waited >= timeout:
                raise WorkerError(
                    f"stage {stage!r}: batch {batch} was not ready after timeout={timeout}s; the worker "
                    "processes were stopped. Raise timeout=, or look for a read that blocks",
                    stage=stage,
                    batch=batch,
                ) from None


def exit_words(code: int | None, oom_before: int | None = None) -> str:
    """How a worker process ended, in words, with the likely cause only where there is evidence.

    ``oom_before`` is this cgroup's count of out-of-memory kills when the pool started (see
    :func:`oom_kills`): a SIGKILL is put down to the OOM killer only if that count rose since.
    """
    if code is None:
        return "is gone"
    if code >= 0:
        return f"exited with code {code} (did the dataset or collate_fn call sys.exit or os._exit?)"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    words = f"was killed by {name} (exit code {code})"
    if -code == signal.SIGKILL:
        now = oom_kills()
        if oom_before is not None and now is not None:
            if now > oom_before:
                return (
                    f"{words}: the kernel's out-of-memory killer ended {now - oom_before} process(es) of this "
                    "cgroup since the pool started (memory.events), so memory ran out: use fewer workers or "
                    "smaller batches, or give the job more memory"
                )
            return f"{words}: the out-of-memory kill count of this cgroup did not rise, so the OOM killer is unlikely; something else sent SIGKILL"
        return f"{words}: something sent SIGKILL; the kernel's out-of-memory killer is one possible cause (see dmesg)"
    if -code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT):
        return f"{words}: a crash in native code (a C extension or library the dataset calls)"
    return words


def oom_kills() -> int | None:
    """This process's cgroup count of out-of-memory kills (v2 ``memory.events``, v1
    ``memory.oom_control``), or None where it cannot be read."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.strip().split(":", 2) for line in f]
    except OSError:
        return None
    v2 = next((p for h, _, p in lines if h == "0"), "/")
    v1 = next((p for _, c, p in lines if "memory" in c.split(",")), "/")
    for path in (
        os.path.join("/sys/fs/cgroup", v2.lstrip("/"), "memory.events"),
        os.path.join("/sys/fs/cgroup/memory", v1.lstrip("/"), "memory.oom_control"),
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ):
        try:
            with open(path) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _rebuild_error(payload: Any, stage: str, batch: int) -> BaseException:
    pickled, text = payload
    exc: BaseException | None = None
    if pickled is not None:
        try:
            exc = pickle.loads(pickled)
        except Exception:  # noqa: BLE001
            exc = None
    if exc is None:
        exc = WorkerError(f"stage {stage!r} failed in a worker process:\n{text}", stage=stage, batch=batch)
    tag_error(exc, stage, batch)
    if hasattr(exc, "add_note"):
        exc.add_note("stoker: traceback in the worker process:\n" + text)
    return exc


def _shutdown(procs: list[Any], tasks: list[Any], results: Any) -> None:
    for q in tasks:
        try:
            q.put(None)
        except (ValueError, OSError):
            pass
    # Read results while the workers finish: a worker blocked writing a large result into a full
    # pipe exits only once it is read, and one killed mid-write would leave a partial message
    # that any later read of the pipe waits on forever. (Found by the sources work: a consumer
    # stopping early on an error hung here.)
    deadline = time.monotonic() + 2.0
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        _discard_result(results, timeout=0.05)
    killed = False
    for p in procs:
        if p.is_alive():
            p.terminate()
            killed = True
        p.join(timeout=2.0)
    while not killed and _discard_result(results, timeout=None):  # complete messages only
        pass
    for q in [*tasks, results]:
        q.close()
        q.join_thread()


def _discard_result(results: Any, timeout: float | None) -> bool:
    """Take one result off the queue and unlink its segment; False when there was none."""
    try:
        _, _, status, payload = results.get(timeout=timeout) if timeout else results.get_nowait()
    except (queue.Empty, OSError, ValueError, EOFError):
        return False
    _discard(status, payload)
    return True
