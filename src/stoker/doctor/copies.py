"""What the training loop's thread does with CUDA between two batch fetches: copies and syncs.

A host-to-device copy that blocks (``.to(device)`` without ``non_blocking=True``, or from memory
that is not pinned: ``pin_memory=False``) and a call that waits for the device (``.item()``,
``.tolist()``, ``.cpu()``, ``float()`` of a CUDA tensor, ``torch.cuda.synchronize()``) stop the
loop's thread until the GPU has caught up, so the next copy never overlaps compute.

:class:`CopyWatch` learns it at the first batch handed out in a process where torch sees a CUDA
device (never on a CPU build or host): it wraps ``torch.Tensor.to``, ``.cuda``, ``.item``,
``.tolist``, ``.cpu``, ``__float__``, ``__int__`` and ``torch.cuda.synchronize``, counts what the
main thread does with them between fetches (other threads and processes pass straight through),
emits one :class:`DeviceStep` per step for the first ``STEPS`` steps, then puts the originals back:
the rest of the run pays nothing. Times are the host's (``perf_counter`` around the call): a
blocking copy or a sync returns only when the device is done, so its time is the loop's wait;
CUDA events would need a sync of their own to be read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from threading import get_ident
from time import perf_counter
from typing import Any

import torch

from stoker.doctor.events import DeviceStep

STEPS = 200  # steps watched per process
SYNCS = ("item", "tolist", "cpu", "__float__", "__int__")  # Tensor methods that wait for a CUDA tensor's value


def _non_blocking(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``non_blocking`` of a ``.to``/``.cuda`` call: by keyword, or the first positional bool (``copy`` comes after it)."""
    return bool(kwargs.get("non_blocking", next((a for a in args if isinstance(a, bool)), False)))


class CopyWatch:
    """Counts the main thread's CUDA copies and syncs per step; see the module's docstring."""

    def __init__(self, emit: Callable[[Any], None], steps: int = STEPS) -> None:
        self.emit = emit
        self.steps = steps
        self.state = "waiting"  # "watching" once installed, "done" after ``steps`` steps or without CUDA
        self._main = threading.main_thread().ident
        self._undo: list[tuple[Any, str, Any]] = []
        self._since = 0.0
        self._reset()

    def _reset(self) -> None:
        self.h2d = self.blocking = self.pageable = self.nbytes = self.syncs = 0
        self.copy_s = self.sync_s = 0.0
        self.ops: set[str] = set()

    # -- life ---------------------------------------------------------------------------------
    def step(self, key: int, requested: float, ready: float) -> None:
        """A batch of loader ``key`` was asked for at ``requested`` and handed out at ``ready``."""
        if self.state == "done" or get_ident() != self._main:
            return
        if self.state == "waiting":
            if not torch.cuda.is_available():
                self.state = "done"
                return
            self._install()
        else:
            self.emit(
                (DeviceStep, key, self._since, requested, self.h2d, self.blocking, self.pageable, self.nbytes)
                + (self.copy_s, self.syncs, self.sync_s, tuple(sorted(self.ops)))
            )
            self.steps -= 1
            if self.steps <= 0:
                self.uninstall()
                return
        self._reset()
        self._since = ready

    def _install(self) -> None:
        tensor = torch.Tensor
        for name in ("to", "cuda"):
            self._patch(tensor, name, self._copy(getattr(tensor, name)))
        for name in SYNCS:
            self._patch(tensor, name, self._sync(getattr(tensor, name), name))
        self._patch(torch.cuda, "synchronize", self._synchronize(torch.cuda.synchronize))
        self.state = "watching"

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._undo.append((owner, name, owner.__dict__.get(name)))
        setattr(owner, name, new)

    def uninstall(self) -> None:
        while self._undo:
            owner, name, old = self._undo.pop()
            if old is None:
                delattr(owner, name)  # inherited from torch's C base class: the lookup finds it again
            else:
                setattr(owner, name, old)
        self.state = "done"

    # -- wrappers -----------------------------------------------------------------------------
    def _copy(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def copy(t: Any, *args: Any, **kwargs: Any) -> Any:
            if get_ident() != self._main:
                return orig(t, *args, **kwargs)
            t0 = perf_counter()
            out = orig(t, *args, **kwargs)
            took = perf_counter() - t0
            src, dst = t.device.type, getattr(getattr(out, "device", None), "type", None)
            if src == "cpu" and dst == "cuda":
                self.h2d += 1
                self.blocking += not _non_blocking(args, kwargs)
                self.pageable += not t.is_pinned()
                self.nbytes += t.nbytes
                self.copy_s += took
            elif src == "cuda" and dst == "cpu" and not _non_blocking(args, kwargs):
                self._synced("to('cpu')", took)
            return out

        return copy

    def _sync(self, orig: Callable[..., Any], name: str) -> Callable[..., Any]:
        label = f"{name.strip('_')}()" if name.startswith("__") else f".{name}()"

        def sync(t: Any, *args: Any, **kwargs: Any) -> Any:
            if get_ident() != self._main or not t.is_cuda:
                return orig(t, *args, **kwargs)
            t0 = perf_counter()
            out = orig(t, *args, **kwargs)
            self._synced(label, perf_counter() - t0)
            return out

        return sync

    def _synchronize(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def synchronize(*args: Any, **kwargs: Any) -> Any:
            if get_ident() != self._main:
                return orig(*args, **kwargs)
            t0 = perf_counter()
            out = orig(*args, **kwargs)
            self._synced("torch.cuda.synchronize()", perf_counter() - t0)
            return out

        return synchronize

    def _synced(self, op: str, took: float) -> None:
        self.syncs += 1
        self.sync_s += took
        self.ops.add(op)
