"""Pipeline: sampling, batch stages and the workers that run them.

Files:
    sampler.py    Sampler (sequential / global / block order, rank sharding), FixedBatches
    stages.py     BatchSource protocol, StoreSource (a store read in chunks of batches)
    columns.py    ArrayColumns (in-memory arrays, a TensorDataset, read batch-level), gather_plan
    threads.py    ordered_map(): worker threads with bounded prefetch, errors tagged by stage
    collate.py    default_collate, flatten/unflatten: samples to batches, batches to leaves
    processes.py  ProcessPool / process_map(): process workers for Dataset.__getitem__, batches via /dev/shm
"""

from stoker.pipeline.sampler import Sampler
from stoker.pipeline.threads import ordered_map

__all__ = ["Sampler", "ordered_map"]
