"""``Subset``: chosen rows of a store or of any batch source, still read batch-level.

``stoker.Subset(data, indices)`` is a :class:`~stoker.pipeline.source.BatchSource` whose row ``i``
is row ``indices[i]`` of ``data``. ``read`` maps each batch's rows and hands the whole chunk to
the inner source in one call, so a store keeps its one gather per column per chunk; ``upcoming``
and ``readahead`` map the batches announced ahead the same way, so a remote store under a subset fetches the
shards of the parent rows ahead; every other hook (collate, finalize, buffers, epoch, report and
its drain/merge between processes, sizes, engine) is the inner source's.

``resolve_subset`` is what the loader calls first: a ``torch.utils.data.Subset`` (as
``random_split`` returns, nested or not) over a store, a store's path or a batch source becomes a
store view or a ``Subset`` instead of falling back to one ``__getitem__`` per sample.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.errors import ConfigError
from stoker.pipeline.ranks import data_fingerprint, digest
from stoker.pipeline.schedule import Costs
from stoker.pipeline.source import BatchSource, overrides
from stoker.pipeline.store_source import StoreSource
from stoker.store.reader import Store
from stoker.store.selection import check_indices
from stoker.stores import open as open_store


class Subset(BatchSource):
    """Rows ``indices`` of ``data`` (in that order; repeats allowed) as a batch source.

    Args:
        data: a :class:`stoker.Store`, its path, or any :class:`stoker.BatchSource` (an
            ``ImageSource``, ``sources.HDF5``, another ``Subset``, ...).
        indices: row numbers of ``data``: a list, range, numpy array or integer tensor. An index
            outside ``0..len(data)-1`` is a ConfigError naming the first bad one.

    A subset of a store given to ``stoker.Loader`` is read as the store view
    ``store.select(indices)``, so the loader's ``columns=`` and padding options apply to it.
    """

    def __init__(self, data: Any, indices: Any) -> None:
        if isinstance(data, (str, os.PathLike)):
            data = open_store(data)  # a directory or a URL
        if isinstance(data, Subset):  # a subset of a subset reads the inner data directly
            outer = check_indices(indices, len(data))
            data, idx = data.dataset, data.indices[outer]
        elif isinstance(data, (Store, BatchSource)):
            idx = check_indices(indices, len(data))
        else:
            raise ConfigError(
                f"stoker.Subset takes a stoker.Store, its path or a stoker.BatchSource, not {type(data).__name__}; "
                "for a torch Dataset use torch.utils.data.Subset",
                option="data",
            )
        self.dataset: Store | BatchSource = data
        self.indices = idx
        self.source: BatchSource = StoreSource(data) if isinstance(data, Store) else data

    def __len__(self) -> int:
        return len(self.indices)

    def __repr__(self) -> str:
        return f"Subset({self.source!r}, rows={len(self.indices)} of {len(self.source)})"

    def read(self, chunk: list[np.ndarray]) -> list[Any]:
        n = len(self.indices)
        mapped = []
        for rows in chunk:
            idx = np.asarray(rows, dtype=np.int64)
            bad = idx[(idx < 0) | (idx >= n)]
            if bad.size:
                raise IndexError(f"row {int(bad[0])} is out of range for a Subset of {n} rows")
            mapped.append(self.indices[idx])
        return self.source.read(mapped)

    def content_fingerprint(self) -> str:
        """What the ranks compare (``pipeline/ranks.py``): a hash of the indices, then the parent's fingerprint."""
        return f"subset:{digest([np.asarray(self.indices, np.int64)])};{data_fingerprint(self.dataset)}"

    def upcoming(self, batches: list[np.ndarray]) -> None:
        """The batches announced ahead, as rows of the inner source (a remote store fetches their shards).

        A row outside the subset is left out of the hint; ``read`` refuses it, naming it.
        """
        if overrides(self.source, "upcoming"):
            self.source.upcoming(self._parent_rows(batches))

    def readahead(self, batches: list[np.ndarray]) -> None:
        self.source.readahead(self._parent_rows(batches))

    def _parent_rows(self, batches: list[np.ndarray]) -> list[np.ndarray]:
        """Each batch as rows of the inner source, rows outside the subset left out (hints only)."""
        n = len(self.indices)
        return [self.indices[idx[(idx >= 0) & (idx < n)]] for idx in (np.asarray(b, dtype=np.int64) for b in batches)]

    @property
    def rowwise(self) -> bool:  # type: ignore[override]
        return self.source.rowwise

    def collate(self, raw: Any) -> Any:
        return self.source.collate(raw)

    def batch_bytes(self, batch_size: int) -> float | None:
        return self.source.batch_bytes(batch_size)

    def costs(self, batch_size: int) -> Costs:
        return self.source.costs(batch_size)

    @property
    def label_names(self) -> tuple[str, ...] | None:  # type: ignore[override]
        return self.source.label_names

    def use_buffers(self, pool: BufferPool) -> None:
        self.source.use_buffers(pool)

    def set_epoch(self, epoch: int) -> None:
        self.source.set_epoch(epoch)

    def set_seed(self, seed: int) -> None:
        self.source.set_seed(seed)

    def finalize(self, batch: Any) -> Any:
        return self.source.finalize(batch)

    def report(self) -> Any:
        return self.source.report()

    # on the process engine a worker's copy counts (skipped rows, ...) and the consumer's copy merges them
    def drain_report(self) -> Any:
        return self.source.drain_report()

    def merge_report(self, part: Any) -> None:
        self.source.merge_report(part)


def resolve_subset(data: Any) -> Any:
    """What the loader reads for ``data``: subsets of stores as store views, torch subsets of batch
    sources as :class:`Subset`; anything else unchanged.

    A ``torch.utils.data.Subset`` (nested ones compose) over a store, a path or a batch source keeps
    the batch-level path; over any other Dataset it stays a Dataset, read per sample.
    """
    if isinstance(data, Subset):
        return data.dataset.select(data.indices) if isinstance(data.dataset, Store) else data
    chain: list[Any] = []
    inner = data
    while _is_torch_subset(inner):
        chain.append(inner.indices)
        inner = inner.dataset
    if not chain:
        return data
    if isinstance(inner, (str, os.PathLike)) and os.path.isdir(inner):
        inner = Store(inner)
    if not isinstance(inner, (Store, BatchSource)):
        return data
    for indices in reversed(chain):  # innermost first: each level picks rows of the one below
        inner = Subset(inner, indices)
    return resolve_subset(inner)


def _is_torch_subset(data: Any) -> bool:
    import torch

    return isinstance(data, torch.utils.data.Subset)


__all__ = ["Subset", "resolve_subset"]
