"""stoker keeps GPUs fed: a memory-mapped Arrow store and a batch loader for PyTorch.

import stoker
stoker.write("stores/digits", {"image": images, "label": labels})
ds = stoker.open("stores/digits")
for batch in stoker.Loader(ds, batch_size=256, shuffle=True, device="cuda"):
    ...
with stoker.doctor("doctor-report") as report:   # where the step time goes, what to change
    train()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for readers and type checkers; at run time each is imported on first use
    from stoker import convert, errors, remote, sources
    from stoker.config import LoaderConfig
    from stoker.errors import (
        ConcurrentIterationError,
        ConfigError,
        EmptyDatasetError,
        InputError,
        ManifestError,
        SampleError,
        SchemaError,
        ShardError,
        StateError,
        StokerError,
        StoreError,
        StoreExistsError,
        StoreNotFoundError,
        StoreWriteError,
        WorkerError,
    )
    from stoker.loader import Loader
    from stoker.pipeline.observe import LoaderInfo, Observer, register_observer
    from stoker.pipeline.sampler import BatchSampler, FixedBatches, Sampler
    from stoker.pipeline.source import BatchSource
    from stoker.pipeline.subset import Subset
    from stoker.store import Binary, Column, Ragged, Scalar, Sequence, Store, String, Tensor
    from stoker.store.interop import export
    from stoker.stores import StoreWriter, merge, open, write

__version__ = "0.1.0"

# subpackages; doctor, lightning, text, tune and vision (optional extras, layers above this file) are not
# named above for type checkers either: ``import stoker`` must not reach them
_SUBPACKAGES = ("convert", "doctor", "errors", "lightning", "remote", "sources", "text", "tune", "vision")
_FROM = {  # a public name -> the module that defines it
    **dict.fromkeys(
        (
            "ConcurrentIterationError ConfigError EmptyDatasetError InputError ManifestError SampleError SchemaError "
            "ShardError StateError StokerError StoreError StoreExistsError StoreNotFoundError StoreWriteError "
            "WorkerError"
        ).split(),
        "stoker.errors",
    ),
    "LoaderConfig": "stoker.config",
    "Loader": "stoker.loader",
    **dict.fromkeys(("LoaderInfo", "Observer", "register_observer"), "stoker.pipeline.observe"),
    **dict.fromkeys(("BatchSampler", "FixedBatches", "Sampler"), "stoker.pipeline.sampler"),
    "BatchSource": "stoker.pipeline.source",
    "Subset": "stoker.pipeline.subset",
    **dict.fromkeys(("Binary", "Column", "Ragged", "Scalar", "Sequence", "Store", "String", "Tensor"), "stoker.store"),
    "export": "stoker.store.interop",
    **dict.fromkeys(("StoreWriter", "merge", "open", "write"), "stoker.stores"),
}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use: ``import stoker`` (and the command line's start) stays light."""
    if name in _SUBPACKAGES:
        value = importlib.import_module(f"stoker.{name}")
    elif name in _FROM:
        value = getattr(importlib.import_module(_FROM[name]), name)
    else:
        raise AttributeError(f"module 'stoker' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BatchSampler",
    "BatchSource",
    "Binary",
    "Column",
    "ConfigError",
    "EmptyDatasetError",
    "FixedBatches",
    "InputError",
    "Loader",
    "LoaderConfig",
    "LoaderInfo",
    "ManifestError",
    "Observer",
    "Ragged",
    "SampleError",
    "Sampler",
    "Scalar",
    "SchemaError",
    "Sequence",
    "ShardError",
    "ConcurrentIterationError",
    "StateError",
    "StokerError",
    "Store",
    "StoreError",
    "StoreExistsError",
    "StoreNotFoundError",
    "StoreWriteError",
    "StoreWriter",
    "String",
    "Subset",
    "Tensor",
    "WorkerError",
    "__version__",
    "convert",
    "doctor",
    "errors",
    "export",
    "lightning",
    "merge",
    "open",
    "register_observer",
    "remote",
    "sources",
    "text",
    "tune",
    "vision",
    "write",
]
