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

import copy
import itertools
import random
from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.pipeline.collate import default_collate, fetch
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.ranks import data_fingerprint, digest, value_parts
from stoker.pipeline.schedule import Costs
from stoker.pipeline.source import BatchSource
from stoker.store.reader import Store

SAMPLED_ITEMS = 8  # items a Dataset's fingerprint reads (twice each), evenly spaced


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

    def content_fingerprint(self) -> str:
        """What the ranks compare (``pipeline/ranks.py``): ``dataset_fingerprint`` of the dataset."""
        return dataset_fingerprint(self.dataset)

    def collate(self, raw: list[Any]) -> Any:
        return default_collate(raw) if self._pool is None else collate_into(raw, self._pool)


def dataset_fingerprint(data: Any) -> str:
    """A map-style Dataset's fingerprint: for a ``torch.utils.data.Subset``, a hash of its indices and
    its parent's; else the dataset's own ``content_fingerprint()`` when it has one, or its class,
    length, the fingerprint of every stoker store or source among its attributes (what it reads) and
    a hash of ``SAMPLED_ITEMS`` items read at start (``sampled_items``). A sample: a change in any
    other item goes unseen unless a store or source it reads holds it."""
    import torch

    if isinstance(data, torch.utils.data.Subset):
        return f"subset:{digest([np.asarray(data.indices, np.int64)])};{dataset_fingerprint(data.dataset)}"
    own = getattr(data, "content_fingerprint", None)
    if callable(own):
        return str(own())
    kind = type(data)
    held = getattr(data, "__dict__", {}).values()
    reads = [data_fingerprint(v) for v in held if isinstance(v, (Store, BatchSource))]
    return ";".join([f"{kind.__module__}.{kind.__qualname__}:{len(data)}", *reads, sampled_items(data)])


def sampled_items(data: Any, count: int = SAMPLED_ITEMS) -> str:
    """A hash of ``count`` items spread evenly over ``data`` (``ranks.value_parts``), each read with
    the global seeds (torch, numpy, random) set to 0, and restored after, so that random transforms
    draw alike on every rank. Read twice: items that still differ (a generator of the dataset's own)
    are left out ("not repeatable"). Cost: ``2 x count`` calls of ``__getitem__`` in this process,
    on a shallow copy of ``data``: a handle that ``__getitem__`` opens on first use (an HDF5 file, an
    LMDB environment) is opened on the copy, never left in this process for its forked workers."""
    picked = np.unique(np.linspace(0, len(data) - 1, num=min(count, len(data)), dtype=np.int64)).tolist()
    try:
        probe = copy.copy(data)
    except (TypeError, copy.Error):  # an object that cannot be copied is read itself
        probe = data
    first, again = (_items(probe, picked) for _ in range(2))
    return first if first == again else "items:not repeatable"


def _items(data: Any, picked: list[int]) -> str:
    import torch

    saved = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            random.seed(0)
            np.random.seed(0)
            return "items:" + digest(itertools.chain.from_iterable(value_parts(data[i]) for i in picked))
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])


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


__all__ = ["DatasetSource", "dataset_fingerprint", "sampled_items", "tensor_columns"]
