"""What ``stoker.Loader`` reads: any input it takes, turned into one :class:`BatchSource`.

A store (or its path) becomes a ``StoreSource``; a plain ``TensorDataset`` array columns (one
gather per tensor per chunk); a BatchSource stays itself; any other map-style Dataset becomes a
``DatasetSource``; subsets of stores and sources (stoker's, torch's ``random_split``) stay
batch-level. Anything else is a ConfigError saying what is accepted.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from stoker.errors import ConfigError
from stoker.pipeline.dataset_source import DatasetSource, tensor_columns
from stoker.pipeline.source import BatchSource
from stoker.pipeline.store_source import StoreSource
from stoker.pipeline.subset import resolve_subset
from stoker.store.reader import Store
from stoker.stores import open as open_store


def as_source(
    data: Any,
    columns: Sequence[str] | Mapping[str, str] | None = None,
    pad_value: int | float = 0,
    pad_to_multiple_of: int | None = None,
    collate_fn: Callable[[Any], Any] | None = None,
) -> BatchSource:
    """The batch source for ``data``: a store (or its path), a BatchSource, or a map-style Dataset.

    ``columns``, ``pad_value`` and ``pad_to_multiple_of`` apply to a store; given for any other
    input they are refused, not ignored.
    """
    data = resolve_subset(data)
    if isinstance(data, (str, os.PathLike)):
        data = open_store(data)  # a directory or a URL
    if isinstance(data, Store):
        if columns is None:
            encoded_images_hint(data)
        return StoreSource(data, columns, pad_value, pad_to_multiple_of or 1)
    given = {
        "columns": columns is not None,
        "pad_value": pad_value != 0,
        "pad_to_multiple_of": pad_to_multiple_of is not None,
    }
    for option, set_here in given.items():
        if set_here:
            raise ConfigError(
                f"{option} applies to a store; {type(data).__name__} decides its own columns and padding",
                option=option,
            )
    arrays = tensor_columns(data) if collate_fn is None else None
    if arrays is not None:
        return arrays
    if isinstance(data, BatchSource):
        return data
    if callable(getattr(data, "read", None)) and hasattr(data, "__len__") and not hasattr(data, "__getitem__"):
        raise ConfigError(
            f"{type(data).__name__} has read() but is not a stoker.BatchSource: subclass stoker.BatchSource",
            option="data",
        )
    if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
        return DatasetSource(data)
    if isinstance(data, torch.utils.data.IterableDataset) or hasattr(data, "__iter__"):
        raise ConfigError(
            "stoker.Loader takes map-style data (with __len__ and __getitem__); an iterable dataset has no random access",
            option="data",
        )
    raise ConfigError(
        f"cannot load from {type(data).__name__}; pass a store, its path, a batch source or a map-style Dataset",
        option="data",
    )


class EncodedImagesWarning(UserWarning):
    """A plain loader over a store of encoded images: its batches hold JPEG bytes, not images."""


def encoded_images_hint(store: Store) -> None:
    """Warn when ``store`` holds encoded images (``stoker convert images``' default) and is read as
    plain columns: the batches then hold lists of JPEG bytes, which a user who converted photos
    rarely wants. ``columns=`` given says the bytes are wanted: no warning then."""
    meta = store.metadata or {}
    if meta.get("kind") == "images" and meta.get("mode") == "encoded":
        warnings.warn(
            f"{store!r} holds encoded images: a plain stoker.Loader hands out its 'image' column as lists "
            "of JPEG bytes. For decoded (and augmented) image batches, load "
            "stoker.vision.ImageSource(store, stoker.vision.train_transforms(224)) instead; to read "
            "the bytes, name the columns (columns=['image', 'label']) and this warning goes",
            EncodedImagesWarning,
            stacklevel=4,
        )


def describe(data: Any) -> str:
    """A source in words for messages: a store's repr, a source's own repr (an HDF5 names its file and
    datasets), else its type."""
    store = getattr(data, "store", None)
    if isinstance(store, Store):
        return repr(store)
    if type(data).__repr__ is not object.__repr__:
        return repr(data)
    return f"the {type(data).__name__}"


__all__ = ["EncodedImagesWarning", "as_source", "describe", "encoded_images_hint"]
