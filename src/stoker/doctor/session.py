"""``Doctor``: ``with stoker.doctor() as report:`` instruments this process for the block.

On entry: a recorder (events in a temporary directory), the doctor's observer registered with
``stoker.register_observer``, the torch DataLoader patches, and a resource sampler thread on
this process and its descendants. On exit, the observer is removed, the patches are undone,
the threads stopped, and the ``Report`` yielded by ``__enter__`` is filled in place (and its
files written under ``out`` when given). An exception in the block still fills the report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

from stoker.doctor.config import DoctorConfig, require_sampler
from stoker.doctor.instrument import Instrumentation
from stoker.doctor.outputs import write_outputs
from stoker.doctor.recorder import Recorder
from stoker.doctor.report import Report, build_report
from stoker.errors import ConfigError


class Doctor:
    """Instrument the ``with`` block; see :func:`stoker.doctor`."""

    def __init__(self, config: DoctorConfig) -> None:
        self.config = config
        self.report = Report()
        self._tmp: str | None = None
        self._recorder: Recorder | None = None
        self._instr: Instrumentation | None = None
        self._sampler: Any = None
        self._t0 = 0.0

    def __enter__(self) -> Report:
        ResourceSampler = require_sampler()
        if self._recorder is not None:
            raise ConfigError("this doctor is already running; make a new one with stoker.doctor()", option="doctor")
        cfg = self.config
        self._tmp = tempfile.mkdtemp(prefix="stoker-doctor-")
        self._t0 = time.perf_counter()
        self._recorder = Recorder(self._tmp, cfg.interval).start()
        self._instr = Instrumentation(self._recorder, cfg.inspect_batches, cfg.probe)
        self._instr.install()
        self._sampler = ResourceSampler(os.getpid(), cfg.interval).start()
        return self.report

    def __exit__(self, *exc: object) -> None:
        instr, tmp = self._instr, self._tmp
        if self._recorder is None or instr is None or tmp is None:  # all three are set together
            return
        try:
            instr.uninstall()
            samples = self._sampler.stop()
            self._recorder.close()
            t1 = time.perf_counter()
            built = build_report(
                tmp,
                samples,
                self._sampler.gpu_status,
                self.config,
                wall=(self._t0, t1),
                sampler_cpu_s=self._sampler.cpu_s,
            )
            self.report.__dict__.update(built.__dict__)
            if self.config.out is not None:
                write_outputs(self.report, self.config)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            self._recorder = self._instr = self._sampler = None


def doctor(
    out: str | os.PathLike | None = None,
    *,
    interval: float = 0.5,
    stall_threshold: float = 0.2,
    html: bool = True,
    trace: bool = True,
    inspect_batches: int = 4,
    probe: bool = True,
) -> Doctor:
    """Time the data loading of the ``with`` block and judge it::

        with stoker.doctor("doctor-report") as report:
            train()
        print(report.verdict, report.stall_share, report.recommendations[0].action)

    Options are those of :class:`stoker.doctor.DoctorConfig`.
    """
    cfg = DoctorConfig(
        interval=interval,
        stall_threshold=stall_threshold,
        out=None if out is None else os.fspath(out),
        html=html,
        trace=trace,
        inspect_batches=inspect_batches,
        probe=probe,
    )
    return Doctor(cfg)
