"""``stoker.convert``: build stores from other data, one function per kind of input.

Each function writes a store and returns its path; the ``stoker convert KIND`` commands call
them. The domain modules (``stoker.text``, ``stoker.vision``, ``stoker.sources``) hold the work;
this module only names it, importing lazily so that ``import stoker`` stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__: list[str] = ["arrays", "dataset", "hdf5", "table"]


def hdf5(file: Any, store: Any, keys: Any = None, **options: Any) -> Path:
    """HDF5 datasets ``keys`` (``"data,labels"``; default all) into a store, chunk by chunk.

    Options: ``shard_size``, ``overwrite``, ``progress``, ``metadata``. See
    :func:`stoker.sources.hdf5_to_store`.
    """
    from stoker.sources.to_store import hdf5_to_store

    return hdf5_to_store(file, store, keys, **options)


def arrays(arrays: Any, store: Any, **options: Any) -> Path:  # noqa: A002 - the kind's name
    """numpy arrays, tensors, ``.npy``/``.npz`` files or a TensorDataset into a store.

    Options: ``names``, ``shard_size``, ``overwrite``, ``progress``, ``metadata``. See
    :func:`stoker.sources.arrays_to_store`.
    """
    from stoker.sources.to_store import arrays_to_store

    return arrays_to_store(arrays, store, **options)


def table(path: Any, store: Any, columns: Any = None, **options: Any) -> Path:
    """Columns of a Parquet, CSV/TSV or JSON Lines file into a store (through pyarrow).

    Options: ``format``, ``shard_size``, ``overwrite``, ``progress``, ``metadata``. See
    :func:`stoker.sources.table_to_store`.
    """
    from stoker.sources.tables import table_to_store

    return table_to_store(path, store, columns, **options)


def dataset(dataset: Any, store: Any, **options: Any) -> Path:
    """Any map-style torch Dataset into a store: ``__getitem__`` in ``workers`` processes, resumable.

    Options: ``workers``, ``names``, ``schema``, ``on_error`` (``"raise"``/``"skip"``),
    ``shard_size``, ``overwrite``, ``progress``, ``metadata``, ``chunk_size``. See
    :func:`stoker.sources.dataset_to_store`.
    """
    from stoker.sources.dataset import dataset_to_store

    return dataset_to_store(dataset, store, **options)
