"""Observers: the public hook through which the doctor, tuning or a user's code watch loaders.

An :class:`Observer` is told about every loader when it is built (a :class:`LoaderInfo`),
times every stage of every batch (:meth:`Observer.span`), and hears of every batch handed out
with the consumer's wait for it (:meth:`Observer.batch`). Every method is a no-op in the base
class; subclass and override what you need.

Attach one to a loader with ``loader.register_observer(obs)``, or to every loader built after
the call, in this process and in the worker processes it forks, with
:func:`register_observer` (as ``torch.nn.modules.module.register_module_forward_hook`` does for
modules): that is how ``stoker doctor`` watches a training script it does not change. Both
return a handle whose ``remove()`` detaches the observer.

Stages, in the order a batch meets them: ``read`` and ``collate`` (in a worker), ``transfer``
(tensors made, host-to-device copy started: in a worker thread, or in the consumer when the
workers are processes), ``h2d_wait`` and ``finalize`` (in the consumer).

A loader with ``"auto"`` settings also tells its observers each decision of its online tuner
(:meth:`Observer.tuned`, a :class:`~stoker.pipeline.autotune.Decision`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoaderInfo:
    """What an observer is told about a loader when it is built.

    Attributes:
        loader_id: a number unique to this loader in its process (never reused, unlike ``id()``);
            every event of this loader carries it.
        name: a label for reports, e.g. ``"stoker.Loader(StoreSource)"``.
        source: the qualified type name of the batch source.
        source_id: ``id()`` of the source (two loaders over one dataset share it).
        engine: ``"threads"`` or ``"processes"``: where ``read`` runs.
        num_workers: workers running ``read`` (0: the consumer's thread).
        batch_size: rows per batch, or None when a batch sampler decides.
        prefetch_factor: chunks in flight per worker.
        pin_memory: whether host batches are staged in pinned memory.
        device: where batches land (``"cpu"``, ``"cuda:0"``).
        store: whether the source reads a memory-mapped stoker store.
        persistent_workers: whether worker processes live across epochs.
        schedule: the loader's schedule in words, who set each setting (``pipeline/schedule.py``);
            the online tuner's later changes are told as decisions (``Observer.tuned``).
    """

    loader_id: int
    name: str
    source: str
    source_id: int
    engine: str
    num_workers: int
    batch_size: int | None
    prefetch_factor: int
    pin_memory: bool
    device: str
    store: bool
    persistent_workers: bool = False
    schedule: str = ""


NO_SPAN = nullcontext()  # the span of a loader nobody observes (reusable)


class Observer:
    """Watches loaders; every method is a no-op here. Override what you need.

    Methods run on the loader's threads and in its worker processes: keep them short and
    thread-safe. An exception raised by an observer propagates into the loader.
    """

    def loader(self, info: LoaderInfo) -> None:
        """A loader was built (or this observer was registered on it)."""

    def span(self, info: LoaderInfo, stage: str) -> Any:
        """A context manager around one stage of one batch (or chunk of batches)."""
        return NO_SPAN

    def batch(self, info: LoaderInfo, requested: float, ready: float, batch: Any) -> None:
        """A batch was handed out. ``requested``: when the consumer asked for it;
        ``ready``: when it was ready (``time.perf_counter()``); ``ready - requested`` is the
        consumer's wait for data."""

    def tuned(self, info: LoaderInfo, decision: Any) -> None:
        """The online tuner (``num_workers="auto"`` / ``prefetch_factor="auto"``) decided: ``decision``
        is a :class:`~stoker.pipeline.autotune.Decision` (``at``, ``action``, ``workers``,
        ``prefetch``, ``wait_share``, ``rate``, ``busy``, ``reason``). Runs in the consumer's thread."""


class Handle:
    """Returned by ``register_observer``: ``remove()`` detaches the observer. Idempotent."""

    def __init__(self, remove: Callable[[], None]) -> None:
        self._remove: Callable[[], None] | None = remove

    def remove(self) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None


def _attach(items: list[Observer], observer: Observer) -> Handle:
    """Append ``observer`` to ``items``; the handle takes it out again."""
    if not isinstance(observer, Observer):
        raise TypeError(f"an observer must subclass stoker.Observer, got {type(observer).__name__}")
    items.append(observer)
    return Handle(lambda: items.remove(observer) if observer in items else None)


class Observers:
    """The observers of one loader, as one: a fan-out over the list, cheap when it is empty."""

    __slots__ = ("info", "items")

    def __init__(self, info: LoaderInfo, items: list[Observer]) -> None:
        self.info = info
        self.items = list(items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, observer: Observer) -> Handle:
        handle = _attach(self.items, observer)
        observer.loader(self.info)
        return handle

    def span(self, stage: str) -> Any:
        items = self.items
        if not items:
            return NO_SPAN
        if len(items) == 1:
            return items[0].span(self.info, stage)
        spans = ExitStack()  # entered here: every caller enters the span at once (``with observers.span(...)``)
        for o in items:
            spans.enter_context(o.span(self.info, stage))
        return spans

    def batch(self, requested: float, ready: float, batch: Any) -> None:
        for o in self.items:
            o.batch(self.info, requested, ready, batch)

    def tuned(self, decision: Any) -> None:
        for o in self.items:
            o.tuned(self.info, decision)


class Registry:
    """Observers attached to every loader built while they are registered."""

    def __init__(self) -> None:
        self._items: list[Observer] = []

    def register(self, observer: Observer) -> Handle:
        return _attach(self._items, observer)

    def current(self) -> list[Observer]:
        return list(self._items)


REGISTRY = Registry()


def qualified_name(kind: type) -> str:
    """``module.QualName`` of a class; the bare name for builtins and classes of ``__main__``."""
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def public_name(kind: type) -> str:
    """A class's name as users write it: through the shortest package that exports it
    (``stoker.vision.ImageSource``, not ``stoker.vision.source.ImageSource``), else :func:`qualified_name`."""
    parts = kind.__module__.split(".")
    for i in range(1, len(parts)):
        package = sys.modules.get(".".join(parts[:i]))
        if package is not None and getattr(package, kind.__qualname__, None) is kind:
            return f"{'.'.join(parts[:i])}.{kind.__qualname__}"
    return qualified_name(kind)


def register_observer(observer: Observer) -> Handle:
    """Attach ``observer`` to every :class:`stoker.Loader` built from now on, until ``remove()``."""
    return REGISTRY.register(observer)


__all__ = ["NO_SPAN", "Handle", "LoaderInfo", "Observer", "Observers", "qualified_name", "register_observer"]
