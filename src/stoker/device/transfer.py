"""Host batches to torch tensors on the target device.

CPU: ``torch.from_numpy`` on the gathered buffers, no copy at all.

CUDA: tensor columns are gathered straight into pinned, recycled staging buffers; the
worker that gathered a batch starts its host-to-device copy on a side stream and records
an event. The consumer waits for that event before the batch is handed out, and tells the
caching allocator that the consumer's stream uses the memory (``record_stream``). The
device tensors are fresh allocations, so nothing handed out is ever a later copy's target;
the pinned staging buffer returns to the pool when the batch no longer references it.

A batch gathered in storage order (fast on the host) is put back in the sampler's order after the
copy: ``start(batch, order)`` takes its rows in ``order`` with ``index_select`` on the side stream,
before the event, so the consumer gets sampled order at no host cost (:func:`reorder`).
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from stoker.device.buffers import BufferPool
from stoker.errors import ConfigError


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(
            f"device {device!r} is not a torch device ('cpu', 'cuda', 'cuda:1', 'auto')", option="device"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device {device!r} was asked for but this torch ({torch.__version__}) sees no CUDA device; "
            "use device='cpu' or 'auto'",
            option="device",
        )
    return dev


def _pinned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return torch.empty(shape, dtype=torch.from_numpy(np.empty(0, dtype)).dtype, pin_memory=True).numpy()


@dataclass
class PendingBatch:
    """A batch whose device copies may still be running."""

    tensors: dict[str, Any]
    event: Any = None  # torch.cuda.Event on CUDA
    host: list[np.ndarray] = field(default_factory=list)  # staging buffers kept busy until handed out


class Transfer:
    """Moves gathered host batches to ``device``; owns the staging buffers and the side stream."""

    def __init__(self, device: str | torch.device | None = "cpu", pin_memory: bool | None = None) -> None:
        self.device = resolve_device(device)
        cuda = self.is_cuda = self.device.type == "cuda"  # an attribute: asked per batch (a property cost 5 %)
        if pin_memory and not cuda:
            if not torch.cuda.is_available():
                warnings.warn("pin_memory=True needs CUDA, which this torch does not see; not pinning", stacklevel=3)
            pin_memory = False
        self.pin_memory = cuda if pin_memory is None else bool(pin_memory)
        # whether a loader reads in storage order and reorders here after the copy (free on a GPU)
        self.reorders = cuda
        self.pool = BufferPool(_pinned if self.pin_memory else None)
        self._stream: torch.cuda.Stream | None = None  # made on first use
        self._stream_lock = threading.Lock()

    def _side_stream(self) -> torch.cuda.Stream:
        with self._stream_lock:
            if self._stream is None:
                self._stream = torch.cuda.Stream(device=self.device)
            return self._stream

    def start(self, batch: dict[str, Any], order: np.ndarray | None = None) -> PendingBatch:
        """Turn numpy arrays into tensors and, on CUDA, start their copies (worker thread); then,
        with ``order``, take the rows of every value in that order (:func:`reorder`)."""
        if not self.is_cuda:
            tensors = {k: _as_tensor(v) for k, v in batch.items()}
            return PendingBatch(tensors if order is None else reorder(tensors, order))
        stream = self._side_stream()
        host = [v for v in batch.values() if isinstance(v, np.ndarray)]
        with torch.cuda.stream(stream):
            tensors = {}
            for k, v in batch.items():
                t = _as_tensor(v)
                if isinstance(t, torch.Tensor):
                    if self.pin_memory and not t.is_pinned():
                        t = t.pin_memory()
                    t = t.to(self.device, non_blocking=True)
                tensors[k] = t
            if order is not None:
                tensors = reorder(tensors, order)
            event = torch.cuda.Event()
            event.record(stream)
        return PendingBatch(tensors, event, host)

    def finish(self, pending: PendingBatch) -> dict[str, Any]:
        """Wait for the copies of ``pending`` and return its tensors (consumer thread)."""
        if pending.event is not None:
            pending.event.synchronize()
            consumer = torch.cuda.current_stream(self.device)
            for t in pending.tensors.values():
                if isinstance(t, torch.Tensor) and t.is_cuda:
                    t.record_stream(consumer)
            pending.host.clear()
        return pending.tensors


def reorder(values: dict[str, Any], order: np.ndarray) -> dict[str, Any]:
    """``values`` with row ``i`` of each being its row ``order[i]``: tensors by ``index_select``
    on their own device (on CUDA, in the current stream), lists and tuples (strings, bytes) on the
    host; scalars and other objects as they are. A value whose rows are not ``len(order)`` raises."""
    n, index, picks = len(order), {}, None
    out: dict[str, Any] = {}
    for k, v in values.items():
        if isinstance(v, torch.Tensor) and v.dim():
            if v.device not in index:
                index[v.device] = torch.from_numpy(np.array(order, dtype=np.int64)).to(v.device, non_blocking=True)
            taken: Any = v.index_select(0, index[v.device]) if len(v) == n else None
        elif isinstance(v, (list, tuple)):
            picks = order.tolist() if picks is None else picks
            taken = type(v)(v[i] for i in picks) if len(v) == n else None
        else:
            taken = v
        if taken is None:
            raise ConfigError(
                f"batch value {k!r} has {len(v)} rows for a batch of {n}: the batch was read in storage order "
                "and cannot be put back in the sampler's order; pass in_batch_order='storage', or make the "
                "source's read return one row per index",
                option="in_batch_order",
            )
        out[k] = taken
    return out


def _as_tensor(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if not value.flags.writeable:
            value = value.copy()
        return torch.from_numpy(value)
    return value
