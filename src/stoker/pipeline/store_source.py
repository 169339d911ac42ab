"""``StoreSource``: a stoker store read in chunks of batches, one gather per column per chunk."""

from __future__ import annotations

from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.errors import ConfigError
from stoker.pipeline.names import column_names
from stoker.pipeline.padding import pad_groups
from stoker.pipeline.schedule import Costs
from stoker.pipeline.source import Batch, BatchSource
from stoker.store.columns import Ragged
from stoker.store.reader import Store


class StoreSource(BatchSource):
    """Gather a chunk of batches from a store; pad sequence columns.

    Called with a list of index arrays (consecutive batches) and returns the list of
    batches. One batch is gathered into recycled buffers; several small batches are gathered
    together, with one gather and one padding pass for the whole chunk, then cut into views.

    Rows inside a batch come in the order of its indices (the sampler's order, as from a torch
    ``DataLoader``); each row is copied once, straight to its place (``store/gather.py``). A sequence column ``x`` becomes ``x`` (padded to the
    longest row of its batch, rounded up to ``pad_to_multiple_of``) and ``x_lengths``.

    Args:
        store: the store to read.
        columns: the columns to read (default: all): a list, or a mapping ``{column: name}`` that
            also renames them in the batch (a sequence column's lengths follow: ``name_lengths``).
        pad_value: padding of sequence columns.
        pad_to_multiple_of: sequence columns are padded to a multiple of this length.
    """

    def __init__(
        self,
        store: Store,
        columns: Any = None,
        pad_value: int | float = 0,
        pad_to_multiple_of: int = 1,
    ) -> None:
        self.store = store
        self.names = column_names(columns or None, list(store.schema), str(store.path))
        self.columns = tuple(self.names)
        keys = [
            k for c, n in self.names.items() for k in (n, f"{n}_lengths")[: 1 + (store.schema[c].kind == "sequence")]
        ]
        clash = sorted({k for k in keys if keys.count(k) > 1})
        if clash:
            raise ConfigError(
                f"columns={columns!r} gives the batch key {clash[0]!r} twice (a sequence column adds <name>_lengths)",
                option="columns",
            )
        self.pad_value = pad_value
        self.pad_to_multiple_of = pad_to_multiple_of
        self.pool = BufferPool()
        # tensor columns are gathered into recycled buffers: (name, row shape, dtype) of each
        self._tensors = [
            (name, col.row_shape, col.numpy_dtype)
            for name in self.columns
            if (col := store.schema[name]).kind == "tensor"
        ]

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self) -> str:
        renamed = {c: n for c, n in self.names.items() if c != n}
        return f"StoreSource({str(self.store.path)!r}, columns={list(self.columns)}" + (
            f", renamed={renamed})" if renamed else ")"
        )

    def use_buffers(self, pool: BufferPool) -> None:
        self.pool = pool

    def batch_bytes(self, batch_size: int) -> float:
        return batch_size * self.store.nbytes / max(len(self.store), 1)

    def costs(self, batch_size: int) -> Costs:
        """A gather of mapped rows (small batches are read in the consumer's thread); a remote
        store's reads also wait on its shards' downloads."""
        return Costs(self.batch_bytes(batch_size), copies=True, fetches=self.store.remote is not None)

    def report(self) -> Any:
        """A remote store's fetch counts (shards, bytes, cache hits, retries); None for a local store."""
        return self.store.remote_stats()

    def upcoming(self, batches: list[np.ndarray]) -> None:
        """A remote store starts fetching the shards of batches not yet read (a local one: nothing)."""
        if self.store.remote is not None and batches:
            self.store.prefetch(np.concatenate([np.sort(b) for b in batches]))

    def readahead(self, batches: list[np.ndarray]) -> None:
        """A local store's rows of these batches asked of the disk now (``Store.willneed``)."""
        self.store.willneed(np.concatenate(batches), self.columns)

    def read(self, chunk: list[np.ndarray]) -> list[Batch]:
        # Tensor columns are gathered straight into recycled buffers (pinned ones on CUDA), one
        # per chunk: a chunk of one batch hands out the buffer itself, a larger chunk a view of
        # it per batch, and the buffer is free again once no batch of the chunk is referenced.
        idx = np.asarray(chunk[0]) if len(chunk) == 1 else np.concatenate(chunk)
        self.store.prefetch(idx)  # a remote store starts fetching all of the chunk's shards at once
        out = {name: self.pool.get(name, (len(idx), *shape), dtype) for name, shape, dtype in self._tensors}
        raw = self.store.gather(idx, self.columns, out)
        if len(chunk) == 1 and not any(isinstance(v, Ragged) for v in raw.values()):
            return [{self.names[c]: raw[c] for c in self.columns}]  # one batch: the gathered arrays themselves
        bounds = np.zeros(len(chunk) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in chunk], out=bounds[1:])
        batches: list[Batch] = [{} for _ in chunk]
        for column in self.columns:
            value, name = raw[column], self.names[column]
            if isinstance(value, Ragged):
                padded = pad_groups(value, bounds, self.pad_value, self.pad_to_multiple_of)
                lengths = value.lengths
                for k, batch in enumerate(batches):
                    batch[name] = padded[k]
                    batch[f"{name}_lengths"] = lengths[bounds[k] : bounds[k + 1]]
            else:
                for k, batch in enumerate(batches):
                    batch[name] = value[bounds[k] : bounds[k + 1]]
        return batches


__all__ = ["StoreSource"]
