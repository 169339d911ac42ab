"""``stoker.convert``: build stores from other data, one function per kind of input.

Each function writes a store and returns its path; the ``stoker convert KIND`` commands call
them. The domain modules (``stoker.text``, ``stoker.vision``, ``stoker.sources``) hold the work;
this module only names it, importing lazily so that ``import stoker`` stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["arrays", "dataset", "hdf5", "images", "table", "text"]


def images(src: Any, store: Any, mode: str = "encoded", **options: Any) -> Any:
    """Image files to a store: see :func:`stoker.vision.convert.convert_images`.

    ``src`` is a folder (ImageFolder layout, or flat with a CSV/JSON labels file), a list of
    paths, or a torchvision-style ImageFolder object; ``mode`` is ``"encoded"`` (JPEG bytes,
    decoded and augmented at load time) or ``"resized"`` (uint8 arrays of ``size``).
    Returns a :class:`stoker.vision.ConvertReport` (its ``path``, ``rows`` and ``skipped``).
    """
    from stoker.vision.convert import convert_images

    return convert_images(src, store, mode, **options)


def text(source: Any, store: Any, tokenizer: Any = "bert-base-uncased", **options: Any) -> Any:
    """Tokenize text (a list of strings, .txt, .jsonl, .csv or .tsv) into a store; see :func:`stoker.text.convert.convert_text`.

    Options: ``max_length`` (default 512), ``text_column``, ``pair_column``, ``label_column``,
    ``keep_empty``, ``encoding_errors``, ``num_workers``, ``shard_size``, ``overwrite``, ``on_progress``.
    """
    from stoker.text.convert import convert_text
    from stoker.text.sources import TextColumns

    picked = {k: options.pop(k) for k in ("text_column", "pair_column", "label_column", "keep_empty", "encoding_errors") if k in options}
    columns = TextColumns(**{k.removesuffix("_column"): v for k, v in picked.items()})
    return convert_text(source, store, tokenizer, columns=columns, **options)


def hdf5(file: Any, store: Any, keys: Any = None, **options: Any) -> Path:
    """HDF5 datasets ``keys`` (``"data,labels"``; default all) into a store, chunk by chunk.

    Options: ``shard_size``, ``overwrite``, ``progress``, ``metadata``. See
    :func:`stoker.sources.hdf5_to_store`.
    """
    from stoker.sources.hdf5_convert import hdf5_to_store

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
