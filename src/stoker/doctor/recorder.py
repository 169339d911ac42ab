"""``Recorder``: timing events from every instrumented process, as JSON lines in one directory.

Each process writes ``events-<pid>.jsonl`` in the run's directory, so a crash keeps what was
written and worker processes never share a file. Each line is a JSON list of events (one
``json.dumps`` per flush, not per event); an event is a JSON list:

    ["step", loader, t_request, t_got]              one batch fetch (data wait = t_got - t_request)
    ["stage", loader, stage, thread, t0, t1]        one pipeline stage of one batch or chunk
    ["loader", loader, {info}]                      a loader seen for the first time
    ["batch", loader, {description}]                dtypes, shapes, padding of an inspected batch
    ["meta", {info}]                                the process: argv, start and end times

Times are ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux: one clock for every process).

The process that installed the recorder appends events to a list (a few hundred nanoseconds)
and a daemon thread writes them every ``interval`` seconds, then at ``close()`` (and at exit).
A process forked from it (a DataLoader worker) writes each event as it happens, because a
forked child has no flusher thread and may leave through ``os._exit``. A hard crash
(``os._exit``, a signal) loses at most the last interval of the main process's events.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# The recorder of this process, for the fork handler (registered once per interpreter;
# os.register_at_fork cannot be undone). Patching needs it; nothing else reads it.
_ACTIVE: list[Recorder] = []
_FORK_HANDLER: list[bool] = []


def _after_fork_in_child() -> None:
    for rec in _ACTIVE:
        rec._become_child()


class Recorder:
    """Collects events of this process and writes them under ``directory``."""

    def __init__(self, directory: str | os.PathLike, interval: float = 0.5) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.interval = float(interval)
        self._buf: list[Any] = []
        self.emit = self._buf.append  # the hot path: one list append
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file = None
        self._pid = os.getpid()

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> Recorder:
        if self._thread is not None:
            return self
        self._open()
        _ACTIVE[:] = [self]
        if not _FORK_HANDLER and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _FORK_HANDLER.append(True)
        self.emit(["meta", {"pid": self._pid, "ppid": os.getppid(), "start": time.perf_counter(), "cpus": os.cpu_count()}])
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="stoker-doctor-recorder", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the writer thread and write what is left. Idempotent."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._file is not None:
            self.emit(["meta", {"pid": self._pid, "end": time.perf_counter()}])
            self.flush()
            self._file.close()
            self._file = None
        if _ACTIVE and _ACTIVE[0] is self:
            _ACTIVE.clear()

    def _open(self) -> None:
        self._pid = os.getpid()
        self._file = open(self.directory / f"events-{self._pid}.jsonl", "a", encoding="utf-8")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    # -- writing ------------------------------------------------------------------------------
    def flush(self) -> None:
        with self._lock:
            if self._file is None:
                return
            n = len(self._buf)
            if n:
                line = json.dumps(self._buf[:n], separators=(",", ":"))
                del self._buf[:n]  # appends made meanwhile stay at the end
                self._file.write(line + "\n")
            self._file.flush()

    def _write_through(self, event: Any) -> None:
        with self._lock:
            if self._file is not None:
                self._file.write(json.dumps([event], separators=(",", ":")) + "\n")
                self._file.flush()

    def _become_child(self) -> None:
        """In a forked child: own file, no thread, every event written at once."""
        self._lock = threading.Lock()
        self._thread = None
        self._buf = []
        self._inherited = self._file  # kept, never flushed here: its buffer belongs to the parent
        self._open()
        self.emit = self._write_through
        self.emit(["meta", {"pid": self._pid, "ppid": os.getppid(), "start": time.perf_counter(), "forked": True}])


def read_events(directory: str | os.PathLike) -> Iterator[tuple[int, list[Any]]]:
    """Every event written under ``directory``, as ``(pid, event)``; a torn last line is skipped."""
    for path in sorted(Path(directory).glob("events-*.jsonl")):
        pid = int(path.stem.split("-", 1)[1])
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    events = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line of a process killed while writing
                for event in events:
                    yield pid, event
