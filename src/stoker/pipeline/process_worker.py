"""The inside of a worker process of :class:`~stoker.pipeline.processes.ProcessPool`: the task loop
that writes each result into its shared-memory slot, and the watch that ends the worker (unlinking its
pool's files) when the consumer process is gone."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from stoker.pipeline.collate import flatten
from stoker.pipeline.segments import unlink_all, unlink_segment
from stoker.pipeline.slots import SlotWriter

_WATCH = 0.2  # seconds between a worker's checks that its consumer process is still there


def watch_parent(parent: int, token: str, writing: threading.Lock) -> None:
    """End this worker when its consumer process ``parent`` is gone, unlinking its pool's files.

    A daemon thread polls ``getppid()`` (a dead parent's children are re-parented). It then takes
    ``writing`` (held while a result is placed and sent) so no segment is made after the sweep.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH)
        writing.acquire(timeout=10.0)
        unlink_all(token)
        os._exit(1)

    threading.Thread(target=watch, name="stoker-watch-consumer", daemon=True).start()


def worker_main(
    fn: Callable[[Any], Any],
    writer: SlotWriter,
    token: str,
    parent: int,
    queues: tuple[Any, Any],
    current: Any,
    doing: Any,
    me: int,
) -> None:
    """Run ``fn`` on the tasks of queue ``tasks`` until a None: each result placed in its task's slot by
    ``writer``, its layout (or the error) put on ``results``; ``doing[2 * me: 2 * me + 2]`` names the task
    in hand, for the consumer to name should this process die."""
    tasks, results = queues
    if "torch" in sys.modules:  # the workers run in parallel already: one torch thread each, as DataLoader's
        sys.modules["torch"].set_num_threads(1)
    writing = threading.Lock()
    watch_parent(parent, token, writing)
    while True:
        task = tasks.get()
        if task is None:
            return
        gen, n, payload, slot, forget = task
        writer.forget(forget)
        if gen != current.value:  # the consumer abandoned that iteration: hand the slot back
            results.put((gen, n, "skipped", None))
            continue
        overflow = None
        doing[2 * me], doing[2 * me + 1] = gen, n  # what this worker is on, should it die
        try:
            writer.begin(slot)
            leaves, spec = flatten(fn(payload))
            with writing:
                layout, overflow, needed = writer.place(leaves, f"stoker_{token}_{gen}_{n}")
                message = pickle.dumps((layout, spec, overflow, needed), protocol=pickle.HIGHEST_PROTOCOL)
                results.put((gen, n, "ok", message))
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - sent back and raised in the consumer
            if overflow is not None:
                unlink_segment(overflow)
            pickled, text = None, traceback.format_exc()
            if isinstance(exc, KeyboardInterrupt):  # SIGINT to this worker: said so (it exited with code 1 before)
                text = f"the worker process (pid {os.getpid()}) was interrupted: KeyboardInterrupt (SIGINT)\n{text}"
            else:
                try:
                    pickled = pickle.dumps(exc)
                except Exception:  # noqa: BLE001
                    pickled = None
            results.put((gen, n, "error", (pickled, text)))
        finally:
            writer.end()
            leaves = []  # no view of the slot is kept past its task


__all__ = ["worker_main", "watch_parent"]
