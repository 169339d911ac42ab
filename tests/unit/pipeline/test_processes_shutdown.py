"""Ending a worker pool waits on the workers themselves, not on timed reads of an empty result queue
(each such read blocked for 50 ms, and every pass of a process loader paid at least one)."""

from __future__ import annotations

import multiprocessing as mp

from stoker.pipeline.processes import _shutdown


def _serve(tasks) -> None:
    while tasks.get() is not None:
        pass


class CountingQueue:
    """A result queue that records reads that may block (``get`` with a timeout)."""

    def __init__(self, ctx) -> None:
        self.inner = ctx.Queue()
        self.blocking_gets = 0

    def get(self, block: bool = True, timeout: float | None = None):
        self.blocking_gets += 1
        return self.inner.get(block, timeout)

    def get_nowait(self):
        return self.inner.get_nowait()

    def close(self) -> None:
        self.inner.close()

    def join_thread(self) -> None:
        self.inner.join_thread()


def test_shutdown_waits_on_the_workers_not_on_an_empty_queue():
    ctx = mp.get_context("fork")
    tasks = [ctx.Queue() for _ in range(3)]
    procs = [ctx.Process(target=_serve, args=(q,), daemon=True) for q in tasks]
    for p in procs:
        p.start()
    results = CountingQueue(ctx)
    _shutdown(procs, tasks, results)
    assert not any(p.is_alive() for p in procs)
    assert all(p.exitcode == 0 for p in procs)  # ended by the None each was sent, not terminated
    assert results.blocking_gets == 0
