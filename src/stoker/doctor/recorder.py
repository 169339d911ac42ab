"""``Recorder``: the events of every instrumented process, as JSON lines in one directory.

Each process writes ``events-<pid>.jsonl`` in the run's directory, so a crash keeps what was
written and worker processes never share a file. Each line holds the events of one flush; the
records and their wire format are defined in ``events.py``.

``emit`` appends an event to a list. The process that starts the recorder writes the list every
``interval`` seconds from a daemon thread; a process forked from it (a worker, which has no such
thread) writes it from ``emit`` once ``interval`` has passed since its last write. Both write the
rest at ``close()``, which runs at exit (``atexit``; a ``multiprocessing`` child runs it among its
exit finalizers, before its ``os._exit``). A hard crash (``os._exit``, a signal) loses at most the
last interval of a process's events.

``cost_s`` counts the seconds the doctor spent in this process: encoding and writing events, and
what the hooks add to it (``Instrumentation`` adds the time its hooks take beyond the work they
time). It is written in the process's last :class:`Meta`, at ``close()``.

``child.py`` loads this file by path (as it loads ``events.py``), so it imports nothing of the
stoker package.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

if __package__:
    from stoker.doctor.events import Event, Meta, decode_line, encode_line
else:  # loaded by path from child.py, which loaded events.py the same way first
    from _stoker_doctor_events import Event, Meta, decode_line, encode_line  # type: ignore[no-redef]

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
        self._due = 0.0  # in a forked child: when ``emit`` writes next
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: TextIO | None = None
        self._pid = os.getpid()
        self.cost_s = 0.0  # seconds the doctor spent in this process (see the module's docstring)

    # -- life ---------------------------------------------------------------------------------
    def start(self) -> Recorder:
        if self._thread is not None:
            return self
        self._open()
        _ACTIVE[:] = [self]
        if not _FORK_HANDLER and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _FORK_HANDLER.append(True)
        self.emit(Meta(pid=self._pid, ppid=os.getppid(), start=time.perf_counter()))
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
            self._buf.append(Meta(pid=self._pid, end=time.perf_counter(), cost_s=self.cost_s))
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
            t0 = time.thread_time()  # this thread's CPU: the GIL waits of the flusher thread are not its cost
            n = len(self._buf)
            if n:
                line = encode_line(self._buf[:n])
                del self._buf[:n]  # appends made meanwhile stay at the end
                self._file.write(line)
            self._file.flush()
            self.cost_s += time.thread_time() - t0

    def _emit_in_child(self, event: Any) -> None:
        self._buf.append(event)
        if time.perf_counter() >= self._due:
            self.flush()
            self._due = time.perf_counter() + self.interval

    def _become_child(self) -> None:
        """In a forked child: own file, no thread; ``emit`` writes once an interval has passed."""
        self._lock = threading.Lock()
        self._thread = None
        self._buf = []
        self._inherited = self._file  # kept, never flushed here: its buffer belongs to the parent
        self._open()
        self.emit = self._emit_in_child
        self.cost_s = 0.0
        self.emit(Meta(pid=self._pid, ppid=os.getppid(), start=time.perf_counter(), forked=True))
        util = sys.modules.get("multiprocessing.util")
        if util is not None:  # a multiprocessing child (a DataLoader worker) runs its finalizers at exit
            util.register_after_fork(self, _close_at_exit)


def _close_at_exit(recorder: Recorder) -> None:
    """In a ``multiprocessing`` child, once it starts: ``recorder.close()`` among its exit finalizers."""
    sys.modules["multiprocessing.util"].Finalize(None, recorder.close, exitpriority=0)


def read_events(directory: str | os.PathLike) -> Iterator[tuple[int, Event]]:
    """Every event written under ``directory``, as ``(pid, record)``; a torn last line is skipped."""
    for path in sorted(Path(directory).glob("events-*.jsonl")):
        pid = int(path.stem.split("-", 1)[1])
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    events = decode_line(line)
                except ValueError:
                    continue  # the last line of a process killed while writing
                for event in events:
                    yield pid, event
