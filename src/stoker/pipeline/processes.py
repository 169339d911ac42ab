"""Process workers for user Python that must run in parallel (a Dataset's ``__getitem__``, user
transforms, hosts with many cores).

A :class:`ProcessPool` runs one function over tasks in worker processes. Each task is lent a
shared-memory batch slot (``pipeline/slots.py``): the worker writes the arrays of its result
there (a source that takes its buffers from the pool's ``SlotBuffers`` renders straight into it)
and only a small layout (names, dtypes, shapes, offsets; small objects inline) travels through
the result queue. The consumer wraps the slot as numpy arrays with no copy, and lends the slot
again once no batch handed out references it. Slots are named ``stoker_<token>_s<k>``,
overflow segments ``stoker_<token>_<generation>_<task>`` (the token starts with the consumer's pid).

A worker that dies (a crash, ``os._exit``, a kill) is found within about ``_POLL`` seconds of
waiting: the consumer checks its workers' liveness on every wait for a result, and raises a
:class:`~stoker.errors.WorkerError` naming the batch that worker was producing and its exit code.

Nothing outlives the consumer: each worker watches its parent *process* (``getppid`` polled by a
daemon thread; ``PR_SET_PDEATHSIG`` is not used, as it fires when the *thread* that started the
worker ends) and, when the consumer is gone, unlinks every slot and segment of its pool and exits.
Closing the pool unlinks them too, and a new pool sweeps segments whose consumer pid is gone.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import pickle
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from stoker.errors import ConcurrentIterationError, WorkerError
from stoker.pipeline.deaths import exit_words, oom_kills
from stoker.pipeline.process_worker import worker_main
from stoker.pipeline.schedule import usable_cores
from stoker.pipeline.segments import sweep_stale_segments, unlink_all, unlink_segment
from stoker.pipeline.slots import Slot, SlotPlan, SlotRing, SlotWriter, read_result

_POLL = 0.25  # seconds between liveness checks while waiting for a result
_END = object()


# -- the consumer -------------------------------------------------------------------------------
class ProcessPool:
    """Worker processes that run ``fn(task)`` and send the results back through shared memory.

    ``fn`` reaches the workers by fork (or by pickling where fork is missing); its result may be
    any nest of dicts, lists and tuples of numpy arrays and small objects. The arrays come back as
    views of a shared-memory slot (writable, no copy); a slot is reused only once nothing
    references the arrays of its batch. Processes start on the first :meth:`map` and stay until
    :meth:`close`, so one pool can serve many epochs (``persistent_workers``). Every :meth:`map`
    call is a new *generation*: results of an abandoned one (the user broke out of the loop) are
    dropped and their slots given back.

    ``fn`` may have ``describe(task) -> (batch, words)``, used to name a task in errors
    (``"batch 12 of epoch 0"``); without it a task is named by its number in the pass.
    """

    def __init__(
        self, fn: Callable[[Any], Any], workers: int, stage: str = "dataset", slots: SlotPlan | None = None
    ) -> None:
        self.fn = fn
        self.workers = workers
        self.stage = stage
        self.plan = slots or SlotPlan()
        self.token = f"{os.getpid()}_{secrets.token_hex(4)}"
        self.owner = os.getpid()  # after fork() the child's copy must not stop these workers or unlink their files
        self._procs: list[Any] = []
        self._tasks: list[Any] = []
        self._results: Any = None
        self._current: Any = None
        self._doing: Any = None
        self._ring: SlotRing | None = None
        self._told: list[int] = []  # per worker: retired slots it was told of
        self._lent: dict[tuple[int, int], Slot | None] = {}  # (generation, task) -> its slot
        self._generation = 0
        self._serving = threading.Lock()  # held by the one map() in progress
        self._oom_kills: int | None = None
        self._active: list[int] = []  # the workers sent tasks, round robin (resize retires some)
        self._retired: set[int] = set()  # told to stop after the tasks they were sent
        self._ctx: Any = None

    def _start(self) -> None:
        sweep_stale_segments()
        ctx = self._ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context("spawn")
        self._results = ctx.Queue()
        self._current = ctx.Value("q", 0, lock=False)
        capacity = max(
            2 * self.workers, 4 * usable_cores(), 16
        )  # worker slots (the tuner: 2 per core), retired ones reused
        self._doing = ctx.Array("q", [-1] * (2 * capacity), lock=False)  # per worker: (generation, task)
        self._oom_kills = oom_kills()
        self._ring = self.plan.ring(self.token)
        self._procs, self._tasks, self._told, self._active, self._retired = [], [], [], [], set()
        for _ in range(self.workers):
            self._spawn()

    def _spawn(self) -> bool:
        """Start one more worker (in the place of one retired and ended, if any); False at capacity."""
        w = next((r for r in sorted(self._retired) if not self._procs[r].is_alive()), None)
        if w is not None:
            self._retired.discard(w)
            self._procs[w].join()
            self._tasks[w].close()
        elif len(self._procs) * 2 >= len(self._doing):
            return False
        else:
            w = len(self._procs)
            self._procs.append(None)
            self._tasks.append(None)
            self._told.append(0)
        ctx = self._ctx
        writer = self.plan.buffers.writer if self.plan.buffers is not None else SlotWriter()
        self._tasks[w], self._told[w] = ctx.Queue(), 0
        queues = (self._tasks[w], self._results)
        args = (self.fn, writer, self.token, os.getpid(), queues, self._current, self._doing, w)
        self._procs[w] = ctx.Process(target=worker_main, args=args, daemon=True, name=f"stoker-{self.stage}-{w}")
        self._procs[w].start()
        self._active.append(w)
        return True

    def resize(self, workers: int) -> None:
        """Run with ``workers`` processes from now on, also while a :meth:`map` runs: new ones are
        forked; a retired one is sent a stop after the tasks it was sent, and ends when it has done them."""
        workers = max(1, workers)
        if not self._procs:
            self.workers = workers
            return
        while len(self._active) > workers:
            w = self._active.pop()
            self._tasks[w].put(None)
            self._retired.add(w)
        while len(self._active) < workers and self._spawn():
            pass
        self.workers = len(self._active)

    def map(
        self, tasks: Iterable[Any], *, depth: int, timeout: float | None = None, knobs: Any = None
    ) -> Iterator[Any]:
        """Yield ``fn(task)`` for each of ``tasks``, in order, at most ``depth`` in flight. With ``knobs``
        (:class:`~stoker.pipeline.threads.Knobs`), ``knobs.workers`` and ``knobs.depth`` are read after
        each result (the online tuner's: :meth:`resize`) and ``knobs.ready`` / ``in_flight`` are set."""
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
        ring = self._ring
        assert ring is not None
        window = max(depth, self.workers)
        ring.limit = max(ring.limit, 2 * window + 4)  # the ring, the user's batch and the loader's chunk
        self._generation += 1
        gen = self._current.value = self._generation
        it = iter(tasks)
        sent = received = 0
        waiting: Any = _END  # a task taken from ``tasks`` but not sent yet
        inflight: dict[int, Any] = {}  # task number -> task, until its result is handed out
        ready: dict[int, Any] = {}

        def send_one() -> bool:
            nonlocal sent, waiting
            if waiting is _END:
                waiting = next(it, _END)
                if waiting is _END:
                    return False
            slot = ring.take()
            if slot is None and ring.size is not None and sent > received:
                return False  # every slot is held: wait for a result, or for the user to drop a batch
            w = self._active[sent % len(self._active)]
            forget, self._told[w] = tuple(ring.retired[self._told[w] :]), len(ring.retired)
            self._tasks[w].put((gen, sent, waiting, None if slot is None else (slot.name, slot.size), forget))
            self._lent[(gen, sent)] = slot
            inflight[sent], waiting = waiting, _END
            sent += 1
            return True

        try:
            while sent - received < window and send_one():
                pass
            while received < sent:
                if knobs is not None:  # before waiting: the results already here beyond the one awaited
                    knobs.ready, knobs.in_flight, knobs.threads = len(ready), sent - received, self.workers
                while received not in ready:
                    g, n, status, payload = self._get(timeout, received, inflight)
                    slot = self._lent.pop((g, n), None)
                    if g != gen or status == "skipped":  # left over from an abandoned iteration
                        _release(slot, status, payload)
                        continue
                    if status == "error":
                        _release(slot, "error", None)
                        raise self._rebuild_error(payload, inflight[n])
                    ready[n] = (slot, payload)
                slot, message = ready.pop(received)
                layout, spec, overflow, needed = pickle.loads(message)
                ring.learn(needed)
                batch = read_result(layout, spec, slot, overflow)
                if slot is not None:
                    slot.lent = False  # the views of ``batch`` hold it now
                del inflight[received]
                received += 1
                if knobs is not None and knobs.workers != self.workers:
                    self.resize(knobs.workers)
                if knobs is not None and max(knobs.depth, self.workers) != window:
                    window = max(knobs.depth, self.workers)
                    ring.limit = max(ring.limit, 2 * window + 4)
                while sent - received < window and send_one():
                    pass
                yield batch
                del batch
        except GeneratorExit:  # the user left the loop: workers skip the rest of this generation
            raise
        except BaseException:
            self.close()  # a failed or interrupted pool is not reused
            raise
        finally:
            if self.owner == os.getpid():  # a fork()'s copy of this map, closed there, leaves the parent's results
                for slot, message in ready.values():
                    _release(slot, "ok", message)
                self._serving.release()

    def _name(self, task: Any, n: int) -> tuple[int, str]:
        describe = getattr(self.fn, "describe", None)
        return describe(task) if describe is not None else (n, f"task {n} of this pass")

    def _get(self, timeout: float | None, awaited: int, inflight: dict[int, Any]) -> Any:
        """The next result; a WorkerError once a worker is found dead or ``timeout`` passed.

        Liveness is checked whenever nothing came for ``_POLL`` seconds and whenever a result other
        than the awaited one came (the awaited one may never come), so a death is found within
        about ``_POLL`` seconds, and the batches finished before it are still handed out.
        """
        waited = 0.0
        while True:
            try:
                result = self._results.get(timeout=_POLL)
            except queue.Empty:
                waited += _POLL
                self._check_alive(awaited, inflight)
                if timeout and waited >= timeout:
                    batch, words = self._name(inflight.get(awaited), awaited)
                    raise WorkerError(
                        f"stage {self.stage!r}: {words} was not ready after timeout={timeout}s; the worker "
                        "processes were stopped. Raise timeout=, or look for a read that blocks",
                        stage=self.stage,
                        batch=batch,
                    ) from None
                continue
            if result[1] != awaited or result[0] != self._generation:
                self._check_alive(awaited, inflight)
            return result

    def _check_alive(self, awaited: int, inflight: dict[int, Any]) -> None:
        # a retired worker that ended after its last task (exit code 0) is not a death
        retired = self._retired
        dead = next(
            (w for w, p in enumerate(self._procs) if not p.is_alive() and (w not in retired or p.exitcode != 0)), None
        )
        if dead is None:
            return
        p = self._procs[dead]
        gen, task = self._doing[2 * dead], self._doing[2 * dead + 1]
        n = task if gen == self._generation and task in inflight else awaited
        batch, words = self._name(inflight.get(n), n)
        raise WorkerError(
            f"worker {p.name} (pid {p.pid}) of stage {self.stage!r} {exit_words(p.exitcode, self._oom_kills)} "
            f"while producing {words}; the pool is closed, start a new iteration to go on",
            stage=self.stage,
            batch=batch,
        )

    def _rebuild_error(self, payload: Any, task: Any) -> BaseException:
        pickled, text = payload
        batch, words = self._name(task, -1)
        exc: BaseException | None = None
        if pickled is not None:
            try:
                exc = pickle.loads(pickled)
            except Exception:  # noqa: BLE001
                exc = None
        if exc is None:
            exc = WorkerError(
                f"stage {self.stage!r} failed in a worker process:\n{text}", stage=self.stage, batch=batch
            )
        if hasattr(exc, "add_note"):
            exc.add_note(f"stoker: raised in stage {self.stage!r} while producing {words}, in a worker process")
            exc.add_note("stoker: traceback in the worker process:\n" + text)
        return exc

    def close(self) -> None:
        """Stop the workers and unlink every slot and segment this pool made. Safe to call twice.
        In a forked child, only forgets them: they are the parent's."""
        if self.owner != os.getpid():
            self._procs, self._tasks, self._results, self._ring = [], [], None, None
            return
        if self._procs:
            _shutdown(self._procs, self._tasks, self._results)
            self._procs, self._tasks, self._results = [], [], None
        if self._ring is not None:
            self.plan.size = self._ring.size  # the next pool of this plan starts with slots that fit
            self._ring.close()
            self._ring = None
        self._lent.clear()
        unlink_all(self.token)


def _release(slot: Slot | None, status: str, message: Any) -> None:
    """Give back the slot of a result nobody will read, and unlink its overflow segment."""
    if slot is not None:
        slot.lent = False
    _discard(status, message)


def _discard(status: str, message: Any) -> None:
    if status == "ok":
        overflow = pickle.loads(message)[2]
        if overflow is not None:
            unlink_segment(overflow)


def _shutdown(procs: list[Any], tasks: list[Any], results: Any) -> None:
    for q in tasks:
        try:
            q.put(None)
        except (ValueError, OSError):
            pass
    # Read results while the workers finish: a worker blocked writing a large result into a full
    # pipe exits only once it is read, and one killed mid-write would leave a partial message
    # that any later read of the pipe waits on forever. Between results, wait on the workers' sentinels, so the wait ends as soon as the last one exits.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        alive = [p for p in procs if p.is_alive()]
        if not alive:
            break
        if not _discard_result(results):
            mp_connection.wait([p.sentinel for p in alive], timeout=0.05)
    killed = False
    for p in procs:
        if p.is_alive():
            p.terminate()
            killed = True
        p.join(timeout=2.0)
    while not killed and _discard_result(results):  # complete messages only
        pass
    for q in [*tasks, results]:
        q.close()
        q.join_thread()


def _discard_result(results: Any) -> bool:
    """Take one result off the queue, if one is there now, and unlink its segment; False when there was none."""
    try:
        _, _, status, payload = results.get_nowait()
    except (queue.Empty, OSError, ValueError, EOFError):
        return False
    _discard(status, payload)
    return True
