"""numpy arrays, tensors, ``.npy``/``.npz`` files or a TensorDataset into a store, slab by slab (``slabs.py``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.convert.slabs import Slab, write_slabs
from stoker.errors import ConfigError
from stoker.sources.arrays import as_columns
from stoker.store.format import Tensor


def convert(
    arrays: Any, store: str | os.PathLike[str], names: Sequence[str] | None, options: ConvertOptions
) -> ConvertResult:
    """Write arrays into a store, one shard-sized slab at a time (``options.workers`` shards at once).

    ``arrays``: a dict name -> array/tensor/``.npy`` path, a sequence of them (named by
    ``names``, else ``"0"``, ``"1"``, ...), a TensorDataset, or an ``.npz`` path.
    Memory-mapped inputs are read slab by slab, so they may be larger than RAM.
    """
    if isinstance(arrays, (list, tuple)):
        columns, _ = as_columns(tuple(arrays), {})
    else:
        columns, _ = as_columns((arrays,), {})
    if names is not None:
        names = [str(n) for n in names]
        if len(names) != len(columns) or len(set(names)) != len(names):
            raise ConfigError(
                f"names {names} must give {len(columns)} distinct column names, one per array", option="names"
            )
        columns = dict(zip(names, columns.values()))
    schema = {k: Tensor(v.dtype, v.shape[1:]) for k, v in columns.items()}

    def read(start: int, stop: int, slot: int) -> Slab:
        return {k: np.ascontiguousarray(v[start:stop]) for k, v in columns.items()}

    source = {"kind": "arrays", "columns": list(columns)}
    rows = len(next(iter(columns.values())))
    write_slabs(store, read, schema, rows, options, metadata={"source": source}, desc="arrays")
    return ConvertResult(Path(store), rows, report={"source": source})
