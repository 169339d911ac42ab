"""A map-style torch ``Dataset`` as a batch source: ``__getitem__`` per row, then a collate.

``read`` fetches the samples of each batch (``__getitems__`` when the dataset has it, else
``dataset[i]`` per row; an error gets a note naming ``dataset[i]``) and ``collate`` stacks them
like torch's ``default_collate``, into numpy arrays: arrays (and CPU tensors) of one shape and
dtype are stacked straight into buffers of the loader's pool, which in a worker process are
carved from the task's shared-memory slot, so the batch is written once, where it is handed out. Its work is user Python, so it runs on the
process engine by default. A plain ``TensorDataset`` of CPU tensors needs none of that: it is
read as :class:`~stoker.pipeline.columns.ArrayColumns`, one gather per tensor per chunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.pipeline.collate import default_collate, fetch
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.schedule import Costs
from stoker.pipeline.source import BatchSource


class DatasetSource(BatchSource):
    """Batches of a map-style dataset (``__len__`` and ``__getitem__``), read in worker processes."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._pool: BufferPool | None = None

    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return f"DatasetSource({type(self.dataset).__name__}, rows={len(self)})"

    def read(self, chunk: list[np.ndarray]) -> list[list[Any]]:
        return [fetch(self.dataset, [int(i) for i in idx]) for idx in chunk]

    def costs(self, batch_size: int) -> Costs:
        """``__getitem__`` is user Python run per row: it holds the GIL."""
        return Costs(self.batch_bytes(batch_size), holds_gil=True)

    def use_buffers(self, pool: BufferPool) -> None:
        self._pool = pool

    def collate(self, raw: list[Any]) -> Any:
        return default_collate(raw) if self._pool is None else collate_into(raw, self._pool)


def _plain(value: Any) -> np.ndarray | None:
    """``value`` as a numpy array if it is one, or a CPU tensor numpy can view; else None."""
    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__
    if module.startswith("torch") and getattr(value, "device", None) is not None and value.device.type == "cpu":
        if str(value.dtype) != "torch.bfloat16":
            return value.detach().numpy()
    return None


def collate_into(samples: list[Any], pool: BufferPool, path: str = "sample") -> Any:
    """``default_collate(samples)``, with every stack of equal-shaped arrays written into ``pool.get``
    buffers; any other part (scalars, strings, namedtuples, shapes that differ) goes to
    ``default_collate`` as it is."""
    first = samples[0]
    if isinstance(first, dict):
        return {k: collate_into([s[k] for s in samples], pool, f"{path}[{k!r}]") for k in first}
    if isinstance(first, (tuple, list)) and not hasattr(first, "_fields") and not isinstance(first, str):
        if first and not isinstance(first[0], (str, bytes)):
            columns = [collate_into(list(col), pool, f"{path}[{i}]") for i, col in enumerate(zip(*samples))]
            return type(first)(columns)
    arrays = [_plain(s) for s in samples]
    head = arrays[0]
    if head is not None and head.dtype.kind in "biufc":
        if all(a is not None and a.shape == head.shape and a.dtype == head.dtype for a in arrays):
            out = pool.get(path, (len(arrays), *head.shape), head.dtype)
            return np.stack(arrays, out=out)  # type: ignore[arg-type]
    return default_collate(samples, path)


def tensor_columns(data: Any) -> ArrayColumns | None:
    """A plain ``TensorDataset`` of CPU tensors as array columns, else None.

    A subclass may change ``__getitem__``, and bfloat16 or GPU tensors have no numpy view: those
    keep the per-sample path.
    """
    import torch

    if type(data) is not torch.utils.data.TensorDataset or not data.tensors:
        return None
    if any(t.device.type != "cpu" or t.dtype == torch.bfloat16 for t in data.tensors):
        return None
    return ArrayColumns({str(i): t.detach().numpy() for i, t in enumerate(data.tensors)}, positional=True)


__all__ = ["DatasetSource", "tensor_columns"]
