"""Batch stages: small callables that turn one batch into the next form.

A loader's worker runs, for every batch of row indices::

    read (gather from the source)  ->  transforms (user/domain, batch-level)  ->  to device

Each stage works on a whole batch; Python runs once per batch, native code once per row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.store.columns import Ragged
from stoker.store.reader import Store

Batch = dict[str, Any]
BatchFn = Callable[[Batch], Batch]


@dataclass(frozen=True)
class StoreRead:
    """Gather rows of a store into recycled buffers; pad sequence columns.

    Rows inside a batch are read in storage order (the indices are sorted): which rows form
    a batch follows the sampler, and reading them in order turns one gather per shard into
    one contiguous write. A sequence column ``x`` becomes ``x`` (padded ``(rows, longest)``,
    longest rounded up to ``pad_to_multiple_of``) and ``x_lengths``.
    """

    store: Store
    pool: BufferPool
    columns: Sequence[str]
    pad_value: int | float = 0
    pad_to_multiple_of: int = 1
    sort: bool = True

    def __call__(self, indices: np.ndarray) -> Batch:
        idx = np.sort(indices) if self.sort else indices
        schema = self.store.schema
        out = {}
        for name in self.columns:
            col = schema[name]
            if col.kind == "tensor":
                out[name] = self.pool.get(name, (len(idx), *col.shape), col.numpy_dtype)
        raw = self.store.gather(idx, self.columns, out)
        batch: Batch = {}
        for name in self.columns:
            value = raw[name]
            if isinstance(value, Ragged):
                batch[name] = value.pad(self.pad_value, self.pad_to_multiple_of)
                batch[f"{name}_lengths"] = value.lengths
            else:
                batch[name] = value
        return batch


def compose(*fns: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    """``compose(f, g, h)(x) == h(g(f(x)))``, skipping ``None``."""
    chain = [f for f in fns if f is not None]

    def run(x: Any) -> Any:
        for f in chain:
            x = f(x)
        return x

    return run
