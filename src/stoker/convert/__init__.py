"""``stoker.convert``: build stores from other data, one function per kind of input.

    stoker.convert.images("photos/", "stores/photos", mode="resized", size=256)
    stoker.convert.text("corpus.txt", "stores/corpus", max_length=128)
    stoker.convert.hdf5("data.h5", "stores/data", keys="data,labels")
    stoker.convert.arrays({"x": x, "y": y}, "stores/xy")
    stoker.convert.table("rows.parquet", "stores/rows", columns="text,label")
    stoker.convert.dataset(MyDataset(), "stores/pre", workers=8, on_error="skip")   # resumable

Every function takes the input (``src``) and the store to write, its kind's own options, and
the shared options of :class:`ConvertOptions` as keywords, with one meaning for every kind:

- ``overwrite``: replace the store if it exists;
- ``shard_size``: bytes of data per shard at most (an int, or a string like ``"256MB"``);
- ``progress``: ``None`` shows a bar on stderr when it is a terminal, ``True``/``False`` always /
  never, a callable is called with the number of items done since its last call;
- ``workers``: how many run in parallel (``None``: the kind's default; each function says what
  a worker is there);
- ``metadata``: JSON-serializable entries added to the store manifest's metadata;
- ``storage_options``: for a store written to an object-store URL (``s3://bucket/prefix``):
  credentials and endpoint, fsspec's keys (without them, the environment and profiles).

Every function returns a :class:`ConvertResult` (``path``, ``rows``, ``skipped``, ``report``,
``seconds``), which can be passed where a path goes (``stoker.open(result)``). The
``stoker convert KIND`` commands call these functions; ``stoker.convert.on_ray.text`` and
``.images`` run the same conversions as Ray tasks over partitions of the input. The work
lives in this package's ``from_*.py`` modules, imported when a function is first called so that ``import stoker``
stays light (see README.md in this directory for the file map).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stoker.convert.options import ConvertOptions, ConvertResult, Progress
from stoker.store.format import Column
from stoker.store.writer import DEFAULT_SHARD_SIZE

__all__ = ["ConvertOptions", "ConvertResult", "arrays", "dataset", "hdf5", "images", "on_ray", "table", "text"]

PathLike = str | os.PathLike[str]


def images(
    src: Any,
    store: PathLike,
    mode: str = "encoded",
    *,
    size: int | tuple[int, int] = 256,
    max_side: int | None = None,
    quality: int = 90,
    labels: Any = None,
    label_names: Sequence[str] | None = None,
    class_to_idx: Mapping[str, int] | None = None,
    on_error: str = "raise",
    max_pixels: int | None = None,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    progress: Progress = None,
    workers: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Image files to a store, decoded and checked (or resized) in ``workers`` threads.

    Args:
        src: a folder (ImageFolder layout, or flat with a labels.csv / labels.json), or such a
            folder in an object store (``s3://bucket/photos/``: downloaded first, ``root`` in the
            metadata is the URL; ``storage_options`` reach it), a list of paths, a :class:`stoker.vision.ImageList`, or a torchvision-style ImageFolder object
            (anything with ``.samples``; its files are read directly, its ``transform`` is not run).
        mode: ``"encoded"`` (JPEG bytes, decoded and augmented at load time) or ``"resized"``
            (uint8 CHW arrays of ``size``: shorter side resized, center cropped).
        size: resized: the output side (int) or (height, width).
        max_side: encoded: re-encode images whose longer side exceeds this (None keeps all sizes).
        quality: JPEG quality (1-100) of re-encoded images.
        labels: for a flat folder or a list of paths: a CSV/JSON file, a mapping or a list.
        label_names, class_to_idx: the class map (names in id order, or a dict name -> id), to
            share one map between splits (a val folder missing a class numbers the others as
            train did); without one, the class folders' (or label names') sorted order, as
            torchvision's ImageFolder numbers them, with a ``SplitClassesWarning`` when a sibling
            folder (``data/train`` beside ``data/val``) numbers a shared class otherwise. A class
            outside a given map is an InputError naming it.
        on_error: ``"raise"`` stops at the first bad file (ImageError naming it); ``"skip"``
            leaves it out and reports it.
        max_pixels: images larger than this are refused as enormous (None: 2**27).
        workers: decoding threads (None: the usable cores; 0: this thread). ``progress`` counts files.

    ``skipped``: the bad files left out. ``report``: ``skipped`` (the :class:`stoker.vision.Skipped`
    records: row, file, reason), ``ignored`` (non-image files found) and ``classes``.
    """
    from stoker.convert import from_images
    from stoker.labels import label_map

    names = label_map(label_names, class_to_idx)
    store_opts = from_images.ImageStoreOptions(mode, size, max_side, quality, on_error, max_pixels)
    shared = ConvertOptions(overwrite, shard_size, progress, workers, metadata, storage_options)
    return _timed(from_images.convert, src, store, labels, store_opts, shared, names)


def text(
    src: Any,
    store: PathLike,
    tokenizer: Any = "bert-base-uncased",
    *,
    max_length: int | None = 512,
    text_column: str = "text",
    pair_column: str | None = None,
    label_column: str | None = "auto",
    keep_empty: bool = True,
    encoding_errors: str = "strict",
    label_names: Sequence[str] | None = None,
    class_to_idx: Mapping[str, int] | None = None,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    progress: Progress = None,
    workers: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Tokenize text into a store: a list of strings, a dict of lists, or a .txt, .jsonl, .csv or .tsv file.

    ``src`` may be text objects in an object store: one (``s3://bucket/corpus.tsv``), those under a prefix
    (``s3://bucket/corpus/``) or matching a pattern (``s3://bucket/corpus/*.txt``), read in name order as
    one file (a CSV/TSV header once: it must be the same in all); ``storage_options`` reach them.

    Args:
        tokenizer: a bundled name, a path to tokenizer.json / vocab.txt, or a tokenizer object.
        max_length: cut longer examples, keeping the special tokens (None: no cut).
        text_column, pair_column, label_column: the fields holding the text, the second text of
            sentence pairs, and the label (``"auto"``: ``label`` when present; None: no label).
        keep_empty: keep empty (whitespace-only) texts as rows (an empty sequence, ``[CLS] [SEP]``),
            as the text loader does, so the store has a row per example of the source; ``False``
            skips them with a warning naming the first lines (``skipped`` counts them all).
        encoding_errors: ``"strict"`` (invalid UTF-8 raises InputError naming the line) or ``"replace"``.
        label_names, class_to_idx: the label map (names in id order, or a dict name -> id), to
            share one map between splits; without one, names are numbered in sorted order. A
            label outside a given map is an InputError naming its line.
        workers: tokenizing threads (None: the usable cores; 0: this thread). ``progress`` counts examples.

    ``skipped``: blank lines of a JSONL/CSV/TSV file (and empty texts with ``keep_empty=False``).
    ``report``: what the manifest's metadata holds under ``"stoker.text"`` (tokenizer,
    ``label_names``, ``skipped_empty``, ``replaced_lines``, ...).
    """
    from stoker.convert import from_text
    from stoker.text.inputs import TextColumns

    columns = TextColumns.of(
        text_column, pair_column, label_column, keep_empty, encoding_errors, label_names, class_to_idx
    )
    shared = ConvertOptions(overwrite, shard_size, progress, workers, metadata, storage_options)
    return _timed(from_text.convert, src, store, tokenizer, max_length, columns, shared)


def hdf5(
    src: PathLike,
    store: PathLike,
    keys: str | Sequence[str] | None = None,
    *,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    progress: Progress = None,
    workers: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    cast: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allow_external: PathLike | Sequence[PathLike] | None = None,
    allow_fill: bool = False,
) -> ConvertResult:
    """Datasets ``keys`` of an HDF5 file (``"data,labels"`` or a list; default: all) into a store, slab by slab.

    Every numeric dtype and per-row shape is kept (column name = key). Compound datasets give
    one column per field (``"table"`` all, ``"table.col1,table.col3"`` some), strings ``String``
    or ``Binary`` columns, vlen arrays ``Sequence`` ones (the mapping: ``stoker/sources/hdf5_types.py``).
    ``cast``: ``{column: dtype}``, e.g. ``{"x": "float64"}`` for a long double dataset torch
    cannot hold. ``workers``: shards written at once (at least 1; None: one per core, at most 4).
    ``progress`` counts rows. ``report``: ``source`` (file, keys, and ``files``: every file read).
    ``allow_external``: directories from which files other than ``src`` may be read (external links,
    external storage, virtual datasets; by default none). ``allow_fill``: convert a dataset whose
    rows were mostly never written (over 64 MiB of fill value) instead of refusing it. The store's
    file system must have room for the rows before anything is written.
    """
    from stoker.convert import from_hdf5

    shared = ConvertOptions(overwrite, shard_size, progress, workers, metadata, storage_options)
    return _timed(from_hdf5.convert, src, store, keys, shared, cast, allow_external, allow_fill)


def arrays(
    src: Any,
    store: PathLike,
    *,
    names: Sequence[str] | None = None,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    progress: Progress = None,
    workers: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """numpy arrays, tensors, ``.npy``/``.npz`` files or a TensorDataset into a store, slab by slab.

    ``src``: a dict name -> array / tensor / ``.npy`` path, a list or tuple of them (named by
    ``names``, else ``"0"``, ``"1"``, ...), a TensorDataset, or an ``.npz`` path. Memory-mapped
    inputs may be larger than RAM. ``workers``: shards written at once (at least 1; None: one
    per core, at most 4). ``progress`` counts rows. ``report``: ``source`` (the column names).
    """
    from stoker.convert import from_arrays

    shared = ConvertOptions(overwrite, shard_size, progress, workers, metadata, storage_options)
    return _timed(from_arrays.convert, src, store, names, shared)


def table(
    src: PathLike,
    store: PathLike,
    columns: Sequence[str] | str | None = None,
    *,
    format: str | None = None,  # noqa: A002 - the user's word for it
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    progress: Progress = None,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Columns (``"a,b"`` or a list; default: all) of a Parquet, CSV/TSV or JSON Lines file into a store.

    ``format``: ``"parquet"``, ``"csv"`` or ``"json"`` (None: from the suffix). Read by pyarrow
    record batch by record batch on one thread (no ``workers``). ``progress`` counts rows.
    ``report``: ``source`` (file and format).
    """
    from stoker.convert import from_table

    shared = ConvertOptions(overwrite, shard_size, progress, None, metadata, storage_options)
    return _timed(from_table.convert, src, store, columns, format, shared)


def dataset(
    src: Any,
    store: PathLike,
    *,
    names: Sequence[str] | None = None,
    schema: Mapping[str, Column] | None = None,
    on_error: str = "raise",
    chunk_size: int = 64,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    progress: Progress = None,
    workers: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Any map-style torch Dataset into a store: ``__getitem__`` in ``workers`` processes, resumable.

    Args:
        src: any object with ``__len__`` and ``__getitem__``.
        names: column names for the positions of tuple samples (default ``"0"``, ``"1"``, ...).
        schema: column types to use instead of inferring them, for some or all fields.
        on_error: ``"raise"`` stops at the first failing index (SampleError naming it);
            ``"skip"`` leaves failing samples out and counts them.
        chunk_size: samples per worker task.
        workers: processes (None: the usable cores; 0: this process). ``progress`` counts samples.

    An interrupted conversion keeps its finished shards beside the store; the same call resumes
    after them. ``skipped``: failing samples left out. ``report``: ``skipped_indices`` (the first 1000).
    """
    from stoker.convert import from_dataset

    shared = ConvertOptions(overwrite, shard_size, progress, workers, metadata, storage_options)
    return _timed(
        from_dataset.convert, src, store, shared, names=names, schema=schema, on_error=on_error, chunk_size=chunk_size
    )


def __getattr__(name: str) -> Any:
    if name == "on_ray":  # the Ray conversions (on_ray.text, on_ray.images), imported when first used
        import importlib

        return importlib.import_module("stoker.convert.on_ray")
    raise AttributeError(f"module 'stoker.convert' has no attribute {name!r}")


def _timed(fn: Callable[..., ConvertResult], *args: Any, **kwargs: Any) -> ConvertResult:
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return dataclasses.replace(result, seconds=time.perf_counter() - t0)
