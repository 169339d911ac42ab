"""``stoker.Loader``: batches from a store (or any map-style torch Dataset) on the device.

The life of a batch from a store::

    Sampler.batches(epoch)            index arrays, in the main thread
      -> StoreRead  (worker thread)   sorted gather into recycled (pinned) buffers
      -> collate_fn (worker thread)   optional, on the numpy batch
      -> Transfer.start               torch.from_numpy; on CUDA the copy on a side stream
      -> Transfer.finish (consumer)   wait for the copy, hand the dict of tensors out

From a torch Dataset, worker *processes* run ``__getitem__`` and the collate, and the
batch comes back through shared memory (see ``pipeline/processes.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from stoker.config import LoaderConfig
from stoker.device.transfer import PendingBatch, Transfer
from stoker.errors import ConfigError, EmptyDatasetError, StateError
from stoker.pipeline.processes import BF16, default_collate, fetch, flatten, process_map, unflatten
from stoker.pipeline.sampler import Sampler, order_name
from stoker.pipeline.stages import StoreRead, chunk_size, chunked
from stoker.pipeline.threads import default_workers, ordered_map
from stoker.store.reader import Store

STATE_VERSION = 1


def _distributed() -> tuple[int, int]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Loader:
    """Iterate batches of ``data`` as dicts of tensors on ``device``.

    Args:
        data: a :class:`stoker.Store`, the path of one, or a map-style torch ``Dataset``
            (anything with ``__len__`` and ``__getitem__``), which is read by worker processes.
        batch_size, shuffle, drop_last, device, num_workers, pin_memory, prefetch_factor,
        collate_fn, timeout: as in ``torch.utils.data.DataLoader``. For a store, ``collate_fn``
            receives the gathered numpy batch (a dict) and returns the batch to move; for a
            Dataset it receives the list of samples, as in torch.
        **options: the other fields of :class:`stoker.LoaderConfig` (``seed``, ``rank``,
            ``world_size``, ``uneven``, ``block_size``, ``window``, ``columns``, ``pad_value``,
            ``pad_to_multiple_of``, ``persistent_workers``).

    Rows inside a store batch come in storage order; which rows form each batch follows the
    (shuffled) sampler. ``state_dict()`` records the batches delivered so far, and
    ``load_state_dict()`` resumes right after them, with any number of workers.
    """

    def __init__(
        self,
        data: Any,
        batch_size: int = 1,
        *,
        shuffle: bool | str = False,
        drop_last: bool = False,
        device: Any = "cpu",
        num_workers: int | None = None,
        pin_memory: bool | None = None,
        prefetch_factor: int = 2,
        collate_fn: Callable[[Any], Any] | None = None,
        timeout: float = 0.0,
        **options: Any,
    ) -> None:
        self.config = LoaderConfig.from_options(
            batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, device=device, num_workers=num_workers,
            pin_memory=pin_memory, prefetch_factor=prefetch_factor, timeout=timeout, **options,
        )  # fmt: skip
        if collate_fn is not None and not callable(collate_fn):
            raise ConfigError(f"collate_fn must be callable, got {collate_fn!r}", option="collate_fn")
        self.collate_fn = collate_fn
        self.data = self._as_source(data)
        cfg = self.config
        if len(self.data) == 0:
            raise EmptyDatasetError(f"{_describe(self.data)} has no rows; there is nothing to load")
        rank, world = _distributed()
        self.sampler = Sampler(
            len(self.data), order_name(cfg.shuffle), cfg.seed, cfg.block_size, cfg.window,
            rank if cfg.rank is None else cfg.rank, world if cfg.world_size is None else cfg.world_size, cfg.uneven,
        )  # fmt: skip
        if self.sampler.samples_per_rank < cfg.batch_size and cfg.drop_last:
            raise EmptyDatasetError(
                f"drop_last=True with batch_size={cfg.batch_size} leaves no batch: this rank has only "
                f"{self.sampler.samples_per_rank} rows"
            )
        self.transfer = Transfer(cfg.device, cfg.pin_memory)
        self._epoch = 0
        self._done = 0  # batches delivered in the current epoch

    @staticmethod
    def _as_source(data: Any) -> Any:
        if isinstance(data, (str, os.PathLike)):
            return Store(data)
        if isinstance(data, Store):
            return data
        if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
            return data
        if isinstance(data, torch.utils.data.IterableDataset) or hasattr(data, "__iter__"):
            raise ConfigError("stoker.Loader takes map-style data (with __len__ and __getitem__); an iterable dataset has no random access", option="data")
        raise ConfigError(f"cannot load from {type(data).__name__}; pass a store, its path, or a map-style Dataset", option="data")

    # -- sizes and positions ------------------------------------------------------------------
    def __len__(self) -> int:
        return self.sampler.num_batches(self.config.batch_size, self.config.drop_last)

    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at ``epoch`` (like DistributedSampler.set_epoch)."""
        if epoch < 0:
            raise ConfigError(f"epoch must be >= 0, got {epoch}", option="epoch")
        self._epoch, self._done = int(epoch), 0

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands: the next ``__iter__`` resumes from here."""
        return {
            "version": STATE_VERSION,
            "epoch": self._epoch,
            "batches_done": self._done,
            "batch_size": self.config.batch_size,
            "drop_last": self.config.drop_last,
            "sampler": self.sampler.fingerprint(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise StateError(f"not a stoker loader state (version {STATE_VERSION}): {state!r:.200}")
        self.sampler.check_fingerprint(state["sampler"])
        for key in ("batch_size", "drop_last"):
            if state[key] != getattr(self.config, key):
                raise StateError(f"cannot resume: the saved position used {key}={state[key]!r}, this loader {getattr(self.config, key)!r}")
        done = int(state["batches_done"])
        if not 0 <= done <= len(self):
            raise StateError(f"cannot resume at batch {done}: an epoch has {len(self)} batches")
        self._epoch, self._done = int(state["epoch"]), done

    # -- iteration ------------------------------------------------------------------------------
    def _workers(self) -> int:
        n = self.config.num_workers
        return default_workers() if n is None else n

    def __iter__(self) -> Iterator[Any]:
        cfg = self.config
        if self._done >= len(self):  # a finished epoch: move on
            self._epoch, self._done = self._epoch + 1, 0
        epoch, start = self._epoch, self._done
        index_batches = self.sampler.batches(epoch, cfg.batch_size, cfg.drop_last, start)
        timeout = cfg.timeout or None
        workers = self._workers()
        if isinstance(self.data, Store):
            columns = cfg.columns or tuple(self.data.schema)
            read = StoreRead(self.data, self.transfer.pool, columns, cfg.pad_value, cfg.pad_to_multiple_of)
            per_chunk = chunk_size(cfg.batch_size * self.data.nbytes / len(self.data))

            def work(chunk: list[np.ndarray]) -> list[tuple[Any, PendingBatch]]:
                batches = read(chunk)
                if self.collate_fn is not None:
                    batches = [self.collate_fn(b) for b in batches]
                return [self._start(b) for b in batches]

            depth = max(1, workers) * cfg.prefetch_factor
            chunks = ordered_map(work, chunked(index_batches, per_chunk), workers=workers, depth=depth, stage="read", timeout=timeout)
            started = (item for chunk in chunks for item in chunk)
        else:
            chunks = None
            started = self._dataset_batches(index_batches, workers, timeout)
        try:
            for item in started:
                batch = self._finish(item)
                self._done += 1
                yield batch
        finally:
            started.close()
            if chunks is not None:
                chunks.close()
        if self._done >= len(self):
            self._epoch, self._done = epoch + 1, 0

    def _start(self, batch: Any) -> tuple[Any, PendingBatch]:
        """Begin moving a batch (any nest of dicts, lists and tuples) to the device."""
        if isinstance(batch, dict) and not any(isinstance(v, (dict, tuple)) for v in batch.values()):
            return None, self.transfer.start(batch)
        leaves, spec = flatten(batch)
        return spec, self.transfer.start({str(i): _leaf(x) for i, x in enumerate(leaves)})

    def _finish(self, started: tuple[Any, PendingBatch]) -> Any:
        spec, pending = started
        tensors = self.transfer.finish(pending)
        if spec is None:
            return tensors
        return unflatten(spec, [tensors[str(i)] for i in range(len(tensors))])

    def _dataset_batches(self, index_batches: Iterator[np.ndarray], workers: int, timeout: float | None) -> Iterator[Any]:
        cfg = self.config
        if workers == 0:
            collate = self.collate_fn or default_collate
            produced = (collate(fetch(self.data, [int(i) for i in idx])) for idx in index_batches)
        else:
            produced = process_map(
                self.data, index_batches, workers=workers, depth=workers * cfg.prefetch_factor,
                collate_fn=self.collate_fn, timeout=timeout,
            )  # fmt: skip
        try:
            for batch in produced:
                yield self._start(batch)
        finally:
            produced.close()


def _leaf(value: Any) -> Any:
    if isinstance(value, BF16):
        return torch.from_numpy(value.bits).view(torch.bfloat16)
    return value


def _describe(data: Any) -> str:
    return repr(data) if isinstance(data, Store) else f"the {type(data).__name__}"
