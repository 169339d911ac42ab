"""``stoker doctor``: run any training script and say where its step time goes and what to change.

    with stoker.doctor("doctor-report") as report:     # in-process
        train()
    $ stoker doctor --out doctor-report -- python train.py --epochs 1

The package is callable: ``stoker.doctor(...)`` is :func:`stoker.doctor.session.doctor`.
Its modules are imported when first used (psutil, rich and matplotlib come with
``pip install 'stoker[doctor]'``). See README.md in this directory for the file map.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from stoker.doctor.config import DoctorConfig

__all__ = ["Doctor", "DoctorConfig", "Report", "doctor", "run_command"]

_LAZY = {"Doctor": "session", "doctor": "session", "Report": "report", "run_command": "run"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stoker.doctor' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"stoker.doctor.{module}"), name)


class _CallableModule(types.ModuleType):
    """Lets ``stoker.doctor(...)`` be called while ``stoker.doctor`` stays a package."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from stoker.doctor.session import doctor

        return doctor(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
