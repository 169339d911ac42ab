"""Instrumentation of a script's interpreter: the doctor's hooks, run there by ``stoker.boot``.

``stoker doctor`` (``run.py:child_env``) sets ``STOKER_DOCTOR_EVENTS`` (the events directory),
``STOKER_DOCTOR_INTERVAL``, ``STOKER_DOCTOR_INSPECT`` and ``STOKER_DOCTOR_PROBE`` and names this
file's hooks in ``STOKER_BOOT``, so every Python process of the script (spawned workers included)
records into the directory: :func:`start` at start-up, :func:`torch_ready` once the script has
imported torch (its DataLoader patched), :func:`stoker_ready` once it has imported stoker (the
doctor's observer of stoker loaders registered). This module, ``events.py`` and ``recorder.py`` are
loaded by path and use only the standard library: nothing is imported before the script imports it.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
HOOKS = {"": "start", "torch": "torch_ready", "stoker": "stoker_ready"}  # when each hook of this file runs
_MADE: dict[str, Any] = {}  # this process's recorder and instrumentation (one doctor run per process)


def _by_path(full: str, path: str) -> Any:
    """The module in file ``path``, loaded as ``full`` by the boot's loader (these hooks run under ``stoker.boot``)."""
    return sys.modules["_stoker_boot"].load(path, full)


def _sibling(name: str) -> Any:
    """A module of this directory, loaded by path."""
    return _by_path(f"_stoker_doctor_{name}", os.path.join(HERE, f"{name}.py"))


def _env(name: str, default: str) -> str:
    """``stoker/settings.py:env``, loaded by path."""
    return _by_path("_stoker_boot_settings", os.path.join(os.path.dirname(HERE), "settings.py")).env(name) or default


def start() -> Any:
    """Start recording into ``$STOKER_DOCTOR_EVENTS`` (nothing when it is unset); the recorder."""
    directory = _env("STOKER_DOCTOR_EVENTS", "")
    if not directory or "recorder" in _MADE:
        return _MADE.get("recorder")
    events = _sibling("events")  # before recorder.py, which imports it by this name
    recorder = _sibling("recorder").Recorder(directory, float(_env("STOKER_DOCTOR_INTERVAL", "0.5")))
    recorder.start()
    rank = os.environ.get("RANK", "")  # torchrun's, not stoker's: read as it is
    recorder.emit(events.Meta(argv=tuple(sys.argv), rank=int(rank) if rank.isdigit() else None))
    atexit.register(recorder.close)
    _MADE["recorder"] = recorder
    return recorder


def _instrumentation() -> Any:
    if "instrumentation" not in _MADE:
        from stoker.doctor.instrument import Instrumentation

        probe = _env("STOKER_DOCTOR_PROBE", "1") != "0"
        _MADE["instrumentation"] = Instrumentation(_MADE["recorder"], int(_env("STOKER_DOCTOR_INSPECT", "4")), probe)
    return _MADE["instrumentation"]


def torch_ready(module: Any) -> None:
    """Patch torch's DataLoader (the script has imported torch)."""
    if "recorder" in _MADE:
        import torch.utils.data.dataloader

        _instrumentation().install_torch(torch.utils.data.dataloader)


def stoker_ready(module: Any) -> None:
    """Observe the script's stoker loaders (it has imported stoker)."""
    if "recorder" in _MADE:
        _instrumentation().install_stoker()
