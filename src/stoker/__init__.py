"""stoker keeps GPUs fed: a memory-mapped Arrow store and a batch loader for PyTorch.

import stoker
stoker.write("stores/digits", {"image": images, "label": labels})
ds = stoker.open("stores/digits")
for batch in stoker.Loader(ds, batch_size=256, shuffle=True, device="cuda"):
    ...
with stoker.doctor("doctor-report") as report:   # where the step time goes, what to change
    train()
"""

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


_LAZY = ("doctor", "lightning", "text", "tune", "vision")  # subpackages of optional extras, imported when first used


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"stoker.{name}")
    raise AttributeError(f"module 'stoker' has no attribute {name!r}")


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
