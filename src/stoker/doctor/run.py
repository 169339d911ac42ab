"""Run a command under the doctor: the script in a child process, its resources sampled from here.

The child gets ``_boot`` first on PYTHONPATH and the events directory in STOKER_DOCTOR_EVENTS
(see ``child.py``). This process samples the child's whole process tree, waits for it, and
builds the report from whatever the child's processes wrote, whether the script finished,
failed or was killed. The exit code is the child's (128 + N for a child killed by signal N).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stoker.doctor.config import DoctorConfig
from stoker.doctor.report import Report, build_report
from stoker.doctor.session import require_sampler
from stoker.errors import ConfigError

BOOT = Path(__file__).resolve().parent / "_boot"
NOT_INSTRUMENTED = (
    "the script's Python was not instrumented (no events were written): run it with a Python that has "
    "stoker installed, e.g. 'stoker doctor -- {python} train.py', and keep PYTHONPATH as it is"
)


def child_env(events: str, config: DoctorConfig) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BOOT), env.get("PYTHONPATH", "")) if p)
    env["STOKER_DOCTOR_EVENTS"] = events
    env["STOKER_DOCTOR_INTERVAL"] = repr(float(config.interval))
    env["STOKER_DOCTOR_INSPECT"] = str(config.inspect_batches)
    env["STOKER_DOCTOR_PROBE"] = "1" if config.probe else "0"
    return env


def run_command(argv: list[str], config: DoctorConfig) -> Report:
    """Run ``argv`` to its end under the doctor; the report's ``exit_code`` is the command's."""
    if not argv:
        raise ConfigError("give the command to run after '--', e.g. stoker doctor -- python train.py", option="command")
    sampler_class = require_sampler()
    events = tempfile.mkdtemp(prefix="stoker-doctor-")
    try:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, env=child_env(events, config))
        except OSError as exc:
            raise ConfigError(
                f"cannot start {argv[0]!r}: {exc.strerror}; check the command after '--'", option="command"
            ) from exc
        sampler = sampler_class(proc.pid, config.interval).start()
        try:
            code = proc.wait()
        except KeyboardInterrupt:  # the child got the SIGINT too; let it finish its own way
            proc.send_signal(signal.SIGINT)
            code = proc.wait()
        t1 = time.perf_counter()
        samples = sampler.stop()
        code = 128 - code if code < 0 else code
        report = build_report(
            events, samples, sampler.gpu_status, config, wall=(t0, t1), command=list(argv), exit_code=code
        )
        if not any(Path(events).glob("events-*.jsonl")):
            report.message = NOT_INSTRUMENTED.format(python=sys.executable)
        return report
    finally:
        shutil.rmtree(events, ignore_errors=True)
