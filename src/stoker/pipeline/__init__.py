"""Pipeline: the source contract, sampling, and the workers that run sources.

The file map and the life of a batch are in ``src/stoker/README.md``. The names below are imported on
first use: a module of this package (``pipeline.memory`` for the doctor's sampler) loads without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stoker.pipeline.observe import LoaderInfo, Observer, register_observer
    from stoker.pipeline.sampler import BatchSampler, FixedBatches, Sampler
    from stoker.pipeline.source import BatchSource

_FROM = {
    **dict.fromkeys(("LoaderInfo", "Observer", "register_observer"), "observe"),
    **dict.fromkeys(("BatchSampler", "FixedBatches", "Sampler"), "sampler"),
    "BatchSource": "source",
}

__all__ = ["BatchSampler", "BatchSource", "FixedBatches", "LoaderInfo", "Observer", "Sampler", "register_observer"]


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module 'stoker.pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(f"stoker.pipeline.{_FROM[name]}"), name)
