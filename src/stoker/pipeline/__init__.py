"""Pipeline: the source contract, sampling, and the workers that run sources.

The file map and the life of a batch are in ``src/stoker/README.md``.
"""

from stoker.pipeline.observe import LoaderInfo, Observer, register_observer
from stoker.pipeline.sampler import BatchSampler, FixedBatches, Sampler
from stoker.pipeline.source import BatchSource

__all__ = ["BatchSampler", "BatchSource", "FixedBatches", "LoaderInfo", "Observer", "Sampler", "register_observer"]
