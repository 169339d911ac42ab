"""What the doctor installs for one run, and removes after: an observer of stoker loaders and
patches of torch's DataLoader (which has no public hook).

- ``torch.utils.data.dataloader._BaseDataLoaderIter.__init__`` / ``__next__``: every batch a torch
  DataLoader iterator hands out (the data wait), and the loader's settings.
- ``torch.utils.data._utils.fetch._MapDatasetFetcher.fetch`` (and the iterable one): the time in
  the Dataset (``__getitem__`` and the collate), in the main process or in forked workers, with
  the number of samples of each fetch. With ``probe``, the first fetch of a map-style Dataset
  in the main process or worker 0 first calls ``__getitem__`` of its first index twice more
  (random generators restored; see ``dataset_facts.draws_randomly``) and records whether the
  outputs differ: random augmentation.
- ``stoker.register_observer``: every stoker loader built during the run, every batch it hands
  out and each stage (read, collate, transfer, h2d_wait, finalize), through the public
  :class:`stoker.Observer` hook. While ``torch.profiler`` records, each stage also runs inside
  ``record_function("stoker.<stage>")``.
- Where torch sees a CUDA device, the first steps' copies and syncs of the loop's thread
  (``copies.py``: ``torch.Tensor.to`` and the methods that wait for the device, wrapped from the
  first batch handed out to the last step watched).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from threading import get_ident
from time import perf_counter
from typing import Any

import torch

from stoker.doctor import dataset_facts, transform_facts
from stoker.doctor.copies import CopyWatch
from stoker.doctor.events import (
    BatchSeen,
    IterStart,
    LoaderDesc,
    LoaderSeen,
    Probe,
    StageSpan,
    Step,
    Tuned,
    WorkerSeen,
)
from stoker.doctor.inspect_batch import describe
from stoker.pipeline.observe import Handle, LoaderInfo, Observer, register_observer

_KEY = "_stoker_doctor_key"


def _variable(obj: Any) -> str:
    """The name a frame of the script (outside torch and stoker) binds ``obj`` to, or ``""``."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.split(".")[0] not in ("torch", "stoker"):
            for name, value in frame.f_locals.items():
                if value is obj and not name.startswith("_"):
                    return name
        frame = frame.f_back  # type: ignore[assignment]
    return ""


def _sized(dataset: Any) -> bool:
    try:
        return len(dataset) > 0
    except TypeError:
        return False


def _name(obj: Any) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ in ("builtins", "__main__") else f"{t.__module__}.{t.__qualname__}"


def _collate_name(fn: Any) -> str:
    """The name of a DataLoader's ``collate_fn``, or ``""`` for torch's own (default_collate, default_convert)."""
    module = getattr(fn, "__module__", "") or ""
    if module.startswith("torch.utils.data"):
        return ""
    return getattr(fn, "__qualname__", "") or type(fn).__qualname__


_profiling = torch.autograd._profiler_enabled


class _Span:
    """One stage of one batch: times it; labels it for torch.profiler when that records."""

    __slots__ = ("rec", "key", "stage", "t0", "rf")

    def __init__(self, rec: Any, key: int, stage: str) -> None:
        self.rec, self.key, self.stage = rec, key, stage
        self.rf: torch.profiler.record_function | None = None

    def __enter__(self) -> _Span:
        if _profiling():
            self.rf = torch.profiler.record_function(f"stoker.{self.stage}")
            self.rf.__enter__()
        self.t0 = perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        t1 = perf_counter()
        if self.rf is not None:
            self.rf.__exit__(None, None, None)
        rec = self.rec
        rec.emit((StageSpan, self.key, self.stage, get_ident(), self.t0, t1, 1))
        rec.cost_s += perf_counter() - t1


class LoaderObserver(Observer):
    """The doctor's observer of stoker loaders: loaders, timed stages, data waits, inspected batches."""

    def __init__(self, instrumentation: Instrumentation) -> None:
        self._instr = instrumentation

    def loader(self, info: LoaderInfo) -> None:
        self._instr._register(info.loader_id, LoaderDesc.from_info(info))

    def span(self, info: LoaderInfo, stage: str) -> _Span:
        return _Span(self._instr._rec, info.loader_id, stage)

    def batch(self, info: LoaderInfo, requested: float, ready: float, batch: Any) -> None:
        self._instr._step(info.loader_id, requested, ready, batch)

    def tuned(self, info: LoaderInfo, decision: Any) -> None:
        self._instr.emit(Tuned.of(info.loader_id, decision))


class Instrumentation:
    """Installs the torch patches and the stoker observer for one recorder; ``uninstall()`` removes them.

    Events go to the recorder as records, or, per batch and per stage, as
    ``(RecordClass, *field values)`` tuples (see ``events.py``). Each hook adds the time it takes
    beyond the work it times (the loader's, the Dataset's) to the recorder's ``cost_s``; the wrappers
    of ``copies.py`` (CUDA hosts, the first steps) are not counted.
    """

    def __init__(self, recorder: Any, inspect_batches: int = 4, probe: bool = True) -> None:
        self._rec = recorder  # its ``emit`` changes in a forked child: look it up on each event
        self.inspect_batches = inspect_batches
        self.probe = probe
        self._probed: set[int] = set()  # Datasets probed in this process (a forked worker inherits it)
        self._undo: list[tuple[Any, str, Any]] = []
        self._seen: set[int] = set()
        self._workers: set[tuple[int, int]] = set()  # (pid, Dataset id) of worker processes already announced
        self._inspected: dict[int, int] = {}
        self._handle: Handle | None = None
        self.copies = CopyWatch(self.emit)

    def emit(self, event: Any) -> None:
        self._rec.emit(event)

    # -- patching -----------------------------------------------------------------------------
    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._undo.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)

    def install(self) -> None:
        """Patch torch's DataLoader and observe every stoker loader built from now on."""
        import torch.utils.data.dataloader

        self.install_torch(torch.utils.data.dataloader)
        self.install_stoker()

    def install_torch(self, dataloader: Any) -> None:
        """Patch the DataLoader iterators of the module ``torch.utils.data.dataloader``."""
        import sys

        fetch = sys.modules["torch.utils.data._utils.fetch"]
        base = dataloader._BaseDataLoaderIter
        if any(owner is base for owner, _, _ in self._undo):
            return
        self._patch(base, "__init__", self._torch_init(base.__init__))
        self._patch(base, "__next__", self._torch_next(base.__next__))
        for fetcher in (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher):
            self._patch(fetcher, "fetch", self._fetch(fetcher.fetch))

    def install_stoker(self) -> None:
        """Observe every stoker.Loader built from now on, through ``stoker.register_observer``."""
        if self._handle is None:
            self._handle = register_observer(LoaderObserver(self))

    def uninstall(self) -> None:
        self.copies.uninstall()
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        while self._undo:
            owner, name, old = self._undo.pop()
            setattr(owner, name, old)

    # -- torch DataLoader -----------------------------------------------------------------------
    def _torch_info(self, loader: Any) -> LoaderDesc:
        dataset = _name(loader.dataset)
        ref, note = dataset_facts.importable_ref(loader.dataset)
        transforms, left = transform_facts.vision_code(loader.dataset)
        return LoaderDesc(
            kind="torch",
            name=f"DataLoader({dataset})",
            source=dataset,
            source_id=id(loader.dataset),
            engine="processes",
            num_workers=loader.num_workers,
            batch_size=loader.batch_size,
            prefetch_factor=loader.prefetch_factor,
            pin_memory=bool(loader.pin_memory),
            persistent_workers=bool(loader.persistent_workers),
            variable=_variable(loader),
            dataset_ref=ref,
            dataset_note=note,
            image_root=dataset_facts.image_root(loader.dataset),
            random_transforms=dataset_facts.random_transforms(loader.dataset),
            transforms=transforms,
            transforms_left=left,
            collate=_collate_name(loader.collate_fn),
        )

    def _register(self, key: int, info: LoaderDesc) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.emit(LoaderSeen(key, info))

    def _torch_init(self, orig: Callable[..., None]) -> Callable[..., None]:
        def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
            t0 = perf_counter()
            orig(it, loader, *args, **kwargs)
            t1 = perf_counter()
            key = id(loader)
            self.emit(IterStart(key, t0, t1))
            setattr(it, _KEY, key)
            if key not in self._seen:
                self._register(key, self._torch_info(loader))
            dataset = loader.dataset
            if self.probe and loader.num_workers == 0 and id(dataset) not in self._probed:
                self._probed.add(id(dataset))  # here, before the first fetch: the probe is not a data wait
                if not isinstance(dataset, torch.utils.data.IterableDataset) and _sized(dataset):
                    self.emit(Probe(id(dataset), dataset_facts.draws_randomly(dataset, 0), 0))
            self._rec.cost_s += perf_counter() - t1

        return __init__

    def _torch_next(self, orig: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def __next__(it: Any) -> Any:
            t0 = perf_counter()
            out = orig(it)
            self._step(it.__dict__.get(_KEY, 0), t0, perf_counter(), out)
            return out

        return __next__

    def _step(self, key: int, requested: float, ready: float, batch: Any) -> None:
        """A batch of loader ``key`` handed out: its ``Step``, the copy watch, the first batches described."""
        rec = self._rec
        rec.emit((Step, key, requested, ready))
        self.copies.step(key, requested, ready)
        if self._inspected.get(key, 0) < self.inspect_batches:
            self._inspect(key, batch)
        rec.cost_s += perf_counter() - ready

    def _fetch(self, orig: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def fetch(fetcher: Any, index: Any) -> Any:
            begin = perf_counter()
            collate = fetcher.collate_fn
            if not getattr(collate, "_stoker_doctor", False):
                fetcher.collate_fn = self._timed_collate(collate, id(fetcher.dataset))
            key = id(fetcher.dataset)
            if (os.getpid(), key) not in self._workers:
                self._worker_seen(key)
            if self.probe and key not in self._probed:
                self._probe(fetcher, index)
            t0 = perf_counter()
            out = orig(fetcher, index)
            t1 = perf_counter()
            items = len(index) if isinstance(index, (list, tuple, range)) else 1
            rec = self._rec
            rec.emit((StageSpan, key, "fetch", get_ident(), t0, t1, items))
            rec.cost_s += perf_counter() - t1 + t0 - begin
            return out

        return fetch

    def _worker_seen(self, key: int) -> None:
        """In a worker process, its first fetch: which worker it is (an idle one fetches too, and gets nothing)."""
        self._workers.add((os.getpid(), key))
        worker = torch.utils.data.get_worker_info()
        if worker is not None:
            self.emit(WorkerSeen(key, worker.id, worker.num_workers))

    def _probe(self, fetcher: Any, index: Any) -> None:
        """``__getitem__`` of the batch's first index twice, in worker 0 only (the main process probes at init)."""
        self._probed.add(id(fetcher.dataset))
        worker = torch.utils.data.get_worker_info()
        first = index[0] if isinstance(index, (list, tuple, range)) and len(index) else index
        map_style = type(fetcher).__name__ == "_MapDatasetFetcher"
        if not map_style or worker is None or worker.id != 0 or not isinstance(first, int):
            return
        self.emit(Probe(id(fetcher.dataset), dataset_facts.draws_randomly(fetcher.dataset, first), first))

    def _timed_collate(self, collate: Callable[[Any], Any], key: int) -> Callable[[Any], Any]:
        def timed(samples: Any) -> Any:
            t0 = perf_counter()
            out = collate(samples)
            t1 = perf_counter()
            rec = self._rec
            rec.emit((StageSpan, key, "collate", get_ident(), t0, t1))
            rec.cost_s += perf_counter() - t1
            return out

        timed._stoker_doctor = True  # type: ignore[attr-defined]
        return timed

    def _inspect(self, key: int, batch: Any) -> None:
        self._inspected[key] = self._inspected.get(key, 0) + 1
        self.emit(BatchSeen(key, describe(batch)))
