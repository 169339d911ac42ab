"""Instrumentation of a script's interpreter, started by ``_boot/sitecustomize.py``.

``stoker doctor`` sets ``STOKER_DOCTOR_EVENTS`` (the events directory),
``STOKER_DOCTOR_INTERVAL``, ``STOKER_DOCTOR_INSPECT`` and ``STOKER_DOCTOR_PROBE`` and puts ``_boot`` first on
PYTHONPATH, so every Python process of the script (spawned workers included) records into
the directory. This module, ``events.py`` and ``recorder.py`` are loaded by path and use only
the standard library: nothing is imported before the script imports it. A post-import hook
patches torch once ``torch`` has been imported, and registers the doctor's observer of stoker
loaders (``stoker.register_observer``) once ``stoker`` has.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any


def _sibling(name: str) -> Any:
    """A module of this directory, loaded by path (the stoker package is not imported)."""
    full = f"_stoker_doctor_{name}"
    if full not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(full, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return sys.modules[full]


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``hooks[name](module)`` right after the top-level module ``name`` has executed."""

    def __init__(self, hooks: dict[str, Callable[[Any], None]]) -> None:
        self.hooks = hooks

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        hook = self.hooks.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            self.hooks.pop(name, None)
            try:
                hook(module)
            except Exception as exc:  # noqa: BLE001 -- never stop the user's script
                sys.stderr.write(f"stoker doctor: could not instrument {name}: {exc!r}\n")

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install_from_env() -> Any:
    """Start recording into ``$STOKER_DOCTOR_EVENTS``; patch torch and observe stoker loaders when they are imported."""
    directory = os.environ.get("STOKER_DOCTOR_EVENTS")
    if not directory:
        return None
    interval = float(os.environ.get("STOKER_DOCTOR_INTERVAL", "0.5"))
    inspect = int(os.environ.get("STOKER_DOCTOR_INSPECT", "4"))
    probe = os.environ.get("STOKER_DOCTOR_PROBE", "1") != "0"
    events = _sibling("events")  # before recorder.py, which imports it by this name
    recorder = _sibling("recorder").Recorder(directory, interval)
    recorder.start()
    recorder.emit(events.Meta(argv=tuple(sys.argv)))
    atexit.register(recorder.close)
    made: list[Any] = []

    def instrumentation() -> Any:
        if not made:
            from stoker.doctor.instrument import Instrumentation

            made.append(Instrumentation(recorder, inspect, probe))
        return made[0]

    def torch_ready(module: Any) -> None:
        import torch.utils.data.dataloader

        instrumentation().install_torch(torch.utils.data.dataloader)
        if os.environ.get("STOKER_TUNE_TRIAL"):  # a stoker tune trial: see stoker/tune/inject.py
            from stoker.tune.inject import watch_torch

            watch_torch(torch.utils.data.dataloader)

    def stoker_ready(module: Any) -> None:
        instrumentation().install_stoker()
        if os.environ.get("STOKER_TUNE_TRIAL"):  # a stoker tune trial: the setting into the script's loaders
            from stoker.tune.inject import install_from_env as tune_trial

            tune_trial()

    hooks: dict[str, Callable[[Any], None]] = {"torch": torch_ready, "stoker": stoker_ready}
    for name in list(hooks):
        if name in sys.modules:
            hooks.pop(name)(sys.modules[name])
    if hooks:
        sys.meta_path.insert(0, _AfterImport(hooks))
    return recorder
