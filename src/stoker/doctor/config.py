"""``DoctorConfig``: every option of a doctor run, frozen and validated; ``require_sampler``: what it needs installed."""

from __future__ import annotations

import os
from dataclasses import dataclass

from stoker.errors import ConfigError


@dataclass(frozen=True)
class DoctorConfig:
    """Options of ``stoker doctor`` and ``stoker.doctor()``.

    Attributes:
        interval: seconds between two samples of CPU, memory, disk and GPU (> 0).
        stall_threshold: share of the training loop's time spent waiting for data from which
            the run is called input-bound (0 < x < 1; default 0.2).
        out: directory for the report files (``report.json``, ``report.html``,
            ``trace.json``); ``None`` writes none (the in-process report is still returned).
        html: write the HTML report with plots (needs matplotlib).
        trace: write the Chrome-trace / Perfetto JSON of steps and stages.
        inspect_batches: batches per loader whose contents are looked at (dtypes, shapes,
            padding) to shape the advice; 0 looks at none.
        probe: call ``__getitem__`` of one index of each map-style torch Dataset twice more
            (random generators restored) to tell whether it draws at random (augmentation),
            which changes the advice; False never calls it outside the script's own fetches.
    """

    interval: float = 0.5
    stall_threshold: float = 0.2
    out: str | None = None
    html: bool = True
    trace: bool = True
    inspect_batches: int = 4
    probe: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.interval, bool) or not isinstance(self.interval, (int, float)) or not self.interval > 0:
            raise ConfigError(
                f"interval must be a number of seconds > 0, like 0.5; got {self.interval!r}", option="interval"
            )
        if (
            isinstance(self.stall_threshold, bool)
            or not isinstance(self.stall_threshold, (int, float))
            or not 0 < self.stall_threshold < 1
        ):
            raise ConfigError(
                f"stall_threshold must be a share between 0 and 1, like 0.2; got {self.stall_threshold!r}",
                option="stall_threshold",
            )
        if self.out is not None:
            if not isinstance(self.out, (str, os.PathLike)):
                raise ConfigError(f"out must be a directory path or None, got {type(self.out).__name__}", option="out")
            object.__setattr__(self, "out", os.fspath(self.out))
        if (
            isinstance(self.inspect_batches, bool)
            or not isinstance(self.inspect_batches, int)
            or self.inspect_batches < 0
        ):
            raise ConfigError(
                f"inspect_batches must be an integer >= 0, got {self.inspect_batches!r}", option="inspect_batches"
            )
        if not isinstance(self.probe, bool):
            raise ConfigError(f"probe must be True or False, got {self.probe!r}", option="probe")


def require_sampler() -> type:
    """The sampler class, or an error saying how to install what it needs."""
    try:
        from stoker.doctor.sampler import ResourceSampler
    except ImportError as exc:
        raise ConfigError(f"stoker doctor needs {exc.name}: pip install 'stoker[doctor]'", option="doctor") from exc
    return ResourceSampler
