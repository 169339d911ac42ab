"""Run a command under the doctor: the script in a child process, its resources sampled from here.

The child runs ``child.py``'s hooks (through ``stoker.boot``) with the events directory in
STOKER_DOCTOR_EVENTS. This process samples the child's whole process tree, waits for it, and
builds the report from whatever the child's processes wrote, whether the script finished,
failed or was killed. The exit code is the child's (128 + N for a child killed by signal N).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from stoker.boot import child_env as child_env_with
from stoker.doctor.child import HOOKS
from stoker.doctor.config import DoctorConfig, require_sampler
from stoker.doctor.report import Report, build_report
from stoker.errors import ConfigError

CHILD = str(Path(__file__).resolve().parent / "child.py")
NOT_INSTRUMENTED = (
    "the script's Python was not instrumented (no events were written): run it with a Python that has "
    "stoker installed, e.g. 'stoker doctor -- {python} train.py', and keep PYTHONPATH as it is"
)


def child_env(events: str, config: DoctorConfig) -> dict[str, str]:
    env = child_env_with({when: [f"{CHILD}:{hook}"] for when, hook in HOOKS.items()})
    env["STOKER_DOCTOR_EVENTS"] = events
    env["STOKER_DOCTOR_INTERVAL"] = repr(float(config.interval))
    env["STOKER_DOCTOR_INSPECT"] = str(config.inspect_batches)
    env["STOKER_DOCTOR_PROBE"] = "1" if config.probe else "0"
    return env


class StderrTail:
    """Copies a child's stderr to this process's stderr as it comes, keeping its last bytes for the report."""

    KEEP = 16384  # bytes of the end of the child's stderr kept

    def __init__(self, pipe: IO[bytes] | None) -> None:
        self._tail = bytearray()
        self._thread: threading.Thread | None = None
        if pipe is not None:
            self._thread = threading.Thread(target=self._copy, args=(pipe,), name="stoker-doctor-stderr", daemon=True)
            self._thread.start()

    def _copy(self, pipe: IO[bytes]) -> None:
        out = getattr(sys.stderr, "buffer", None)
        with pipe:
            for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
                if out is not None:
                    out.write(chunk)
                    out.flush()
                else:
                    sys.stderr.write(chunk.decode("utf-8", "replace"))
                    sys.stderr.flush()
                self._tail += chunk
                del self._tail[: -self.KEEP]

    def join(self, timeout: float = 5.0) -> None:
        """Wait until the child's stderr is closed, at most ``timeout`` s (a process it started may hold it open)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def text(self) -> str:
        return self._tail.decode("utf-8", "replace")


_IMPORT_ERROR = re.compile(r"^(?:ModuleNotFoundError|ImportError): .*$", re.MULTILINE)


def interpreter(program: str, path: str | None) -> str:
    """``program`` (the command's argv[0]) as the file that ran: found on ``path``, then its links resolved."""
    found = shutil.which(program, path=path) if os.sep not in program else program
    if found is None:
        return program
    absolute = os.path.abspath(found)
    real = os.path.realpath(absolute)
    return absolute if real == absolute else f"{absolute} (-> {real})"


def failed_child_note(argv: list[str], path: str | None, stderr_tail: str) -> str:
    """What to tell of a command that failed or fetched no batch: the interpreter that ran, and an import it lacked."""
    ran = interpreter(argv[0], path)
    note = f"the command ran {ran}"
    failed = _IMPORT_ERROR.findall(stderr_tail)
    if not failed:
        return note
    note += f", which failed on an import ({failed[-1].strip()})"
    if ran.split(" (-> ")[0] == os.path.abspath(sys.executable):  # stoker's own Python: the package is missing there
        return note + ": install the missing package into that environment"
    rest = " ".join(shlex.quote(a) for a in argv[1:])
    return (
        note
        + (
            ": that Python lacks the script's packages; run the script with the Python of the environment that has "
            f"them, e.g. stoker doctor -- {shlex.quote(_this_python())} {rest}"
        ).rstrip()
    )


def _this_python() -> str:
    """The Python stoker runs in (a virtual environment's, where stoker is installed), relative to here when under it."""
    python = sys.executable
    try:
        relative = os.path.relpath(python)
    except ValueError:  # another drive
        return python
    return relative if not relative.startswith("..") else python


def run_command(argv: list[str], config: DoctorConfig, stdout: int | IO[str] | None = None) -> Report:
    """Run ``argv`` to its end under the doctor; the report's ``exit_code`` is the command's.

    ``stdout``: where the script's standard output goes (a file descriptor or file; None: this process's stdout).
    """
    if not argv:
        raise ConfigError("give the command to run after '--', e.g. stoker doctor -- python train.py", option="command")
    sampler_class = require_sampler()
    events = tempfile.mkdtemp(prefix="stoker-doctor-")
    try:
        t0 = time.perf_counter()
        env = child_env(events, config)
        try:
            proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.PIPE)
        except OSError as exc:
            raise ConfigError(
                f"cannot start {argv[0]!r}: {exc.strerror}; check the command after '--'", option="command"
            ) from exc
        tail = StderrTail(proc.stderr)
        sampler = sampler_class(proc.pid, config.interval).start()
        try:
            code = proc.wait()
        except KeyboardInterrupt:  # the child got the SIGINT too; let it finish its own way
            proc.send_signal(signal.SIGINT)
            code = proc.wait()
        tail.join()
        t1 = time.perf_counter()
        samples = sampler.stop()
        code = 128 - code if code < 0 else code
        report = build_report(
            events,
            samples,
            sampler.gpu_status,
            config,
            wall=(t0, t1),
            command=list(argv),
            exit_code=code,
            sampler_cpu_s=sampler.cpu_s,
        )
        if not any(Path(events).glob("events-*.jsonl")):
            report.message = NOT_INSTRUMENTED.format(python=sys.executable)
        if code != 0 or not report.loaders:
            report.note = failed_child_note(argv, env.get("PATH"), tail.text())
        return report
    finally:
        shutil.rmtree(events, ignore_errors=True)
