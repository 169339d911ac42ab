"""Inside the script's process during a ``stoker tune -- python train.py`` trial: the setting put
into the script's loaders, the script's own steps measured, the script ended after them.

``stoker tune`` runs the script with this module's :data:`HOOKS` (through ``stoker.boot``) and
``STOKER_TUNE_TRIAL`` set to a JSON object: ``setting`` (loader keywords), ``out`` (the file
the trial's result is written to) and ``ending``, how the trial ends (``batches``, ``warmup``,
``min_seconds``, ``stable``, ``max_seconds``: see ``trial.py``'s :class:`Ending`). The boot hook
calls :func:`install_from_env` once the script imports stoker, and :func:`watch_torch` once it
imports torch.

- **The setting.** ``stoker.Loader.__init__`` (and so ``stoker.text.Loader``'s, which calls it)
  is wrapped so that the setting's keywords replace the ones the script passed; every other
  argument reaches the loader unchanged. The keywords of :data:`TUNED` the script gave are
  recorded (``given``).
  There is no public hook that changes a loader's options (observers watch, they do not steer),
  so this one wrapper is the way in; it is only installed in a trial's process.
- **The measure.** An observer (``stoker.register_observer``) counts the batches of the first
  stoker loader that hands one out: ``warmup`` batches first, then the timed span runs from the
  last warm-up batch's hand-out to the hand-out of the last timed one, each gap being the
  script's own step plus its wait for the next batch. Rows per second over that span, and the
  share of it the script waited for data.
- **The end.** When the trial's ending is reached, the result is written and ``SystemExit(0)`` is
  raised from the loader's ``__next__`` in the script: its ``finally`` blocks and ``atexit``
  handlers run, its loaders close. If the script ends first, the result says how many batches it
  read. A torch ``DataLoader`` iterated before any stoker loader handed out a batch ends the
  trial too, with the DataLoader's settings in the result: stoker tune sets stoker loaders only.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from typing import Any

from stoker.pipeline.observe import LoaderInfo, Observer, register_observer
from stoker.settings import env
from stoker.tune.trial import Ending, nbytes, rows_of

TRIAL_ENV = "STOKER_TUNE_TRIAL"
HOOKS = {"torch": "watch_torch", "stoker": "install_from_env"}  # when each hook runs in the script's Python
TUNED = ("num_workers", "engine", "prefetch_factor", "pin_memory")  # the keywords a trial may set
INFO_KEYS = ("num_workers", "engine", "prefetch_factor", "pin_memory", "batch_size", "device", "name")


class TrialRecorder(Observer):
    """Measures the script's steps on its first busy stoker loader and ends the script when done."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.ending = Ending(**spec["ending"])
        self.loaders: dict[int, dict[str, Any]] = {}
        self.given: list[dict[str, Any]] = []
        self.key: int | None = None
        self.seen = self.rows = self.size = 0
        self.waited = 0.0
        self.marks: list[float] = []
        self.written = self.installed = False
        self.lock = threading.Lock()

    def loader(self, info: LoaderInfo) -> None:
        self.loaders[info.loader_id] = {k: getattr(info, k) for k in INFO_KEYS}

    def batch(self, info: LoaderInfo, requested: float, ready: float, batch: Any) -> None:
        if self.key is None:
            self.key = info.loader_id
        if info.loader_id != self.key or self.written:
            return
        self.seen += 1
        if self.seen == self.ending.warmup:  # the timed span starts when the last warm-up batch is handed out
            self.marks.append(ready)
            return
        if self.seen < self.ending.warmup:
            return
        if not self.marks:  # warmup=0: the span starts when the first batch was asked for
            self.marks.append(requested)
        self.marks.append(ready)
        self.waited += ready - requested
        rows = rows_of(batch)
        self.rows += rows
        self.size = self.size or nbytes(batch) // max(1, rows)
        if self.ending.done(self.marks):
            self.write(done=True)
            raise SystemExit(0)

    def result(self, done: bool) -> dict[str, Any]:
        timed = len(self.marks) - 1
        elapsed = self.marks[-1] - self.marks[0] if timed > 0 else 0.0
        return {
            "done": done,
            "batches": self.seen,
            "rows": self.rows,
            "rows_per_s": self.rows / elapsed if elapsed > 0 else None,
            "wait_share": self.waited / elapsed if elapsed > 0 else None,
            "batch_bytes": self.size * self.rows // max(1, timed),
            "loader": self.loaders.get(self.key) if self.key is not None else None,
            "given": self.given,
        }

    def write(self, done: bool, **extra: Any) -> None:
        with self.lock:
            if self.written:
                return
            self.written = True
            out = {**self.result(done), **extra}
            tmp = f"{self.spec['out']}.part"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(out, f, default=str)
            os.replace(tmp, self.spec["out"])


_RECORDER: list[TrialRecorder] = []  # this process's recorder (one trial per process)


def _recorder() -> TrialRecorder | None:
    """The trial's recorder, made on first use from ``STOKER_TUNE_TRIAL`` (None outside a trial)."""
    if not _RECORDER:
        raw = env(TRIAL_ENV)
        if not raw:
            return None
        recorder = TrialRecorder(json.loads(raw))
        _RECORDER.append(recorder)
        atexit.register(recorder.write, False)  # the script ended before the trial did: say how far it got
    return _RECORDER[0]


def install_from_env(stoker: Any = None) -> TrialRecorder | None:
    """In a trial's process (``STOKER_TUNE_TRIAL`` set), once stoker is imported: put the setting into every
    stoker loader built from now on and measure the first one's steps. Nothing otherwise; once per process."""
    recorder = _recorder()
    if recorder is None or recorder.installed:
        return recorder
    recorder.installed = True
    _override_loader_options(dict(recorder.spec.get("setting", {})), recorder)
    register_observer(recorder)
    return recorder


def _override_loader_options(setting: dict[str, Any], recorder: TrialRecorder) -> None:
    from stoker.loader import Loader

    original = Loader.__init__

    def __init__(self: Any, data: Any, *args: Any, **kwargs: Any) -> None:
        recorder.given.append({k: kwargs[k] for k in TUNED if k in kwargs})
        kwargs.update(setting)
        original(self, data, *args, **kwargs)

    Loader.__init__ = __init__  # type: ignore[method-assign]


def watch_torch(torch: Any) -> None:
    """Once torch is imported: end the trial when the script iterates a torch DataLoader before any stoker loader
    handed out a batch: stoker tune sets the keywords of stoker loaders only (the result names the DataLoader)."""
    recorder = _recorder()
    if recorder is None:
        return
    from torch.utils.data import dataloader

    base: Any = dataloader._BaseDataLoaderIter
    original = base.__init__

    def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        original(it, loader, *args, **kwargs)
        if recorder.key is None:
            described = {
                "dataset": type(loader.dataset).__qualname__,
                "num_workers": loader.num_workers,
                "batch_size": loader.batch_size,
                "prefetch_factor": loader.prefetch_factor,
                "pin_memory": bool(loader.pin_memory),
            }
            recorder.write(False, torch_dataloader=described)
            raise SystemExit(0)

    base.__init__ = __init__
