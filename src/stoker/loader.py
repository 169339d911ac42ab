"""``stoker.Loader``: batches from a store, any batch source, or any map-style torch Dataset.

The life of a batch from a store (or any :class:`~stoker.pipeline.stages.BatchSource`)::

    batch sampler (main thread)      index arrays for this rank and epoch, grouped in chunks
      -> source.read  (worker)       one gather for the chunk, into recycled (pinned) buffers
      -> collate_fn   (worker)       optional, on each numpy batch
      -> Transfer.start (worker)     torch.from_numpy; on CUDA the copy on a side stream
      -> Transfer.finish (consumer)  wait for that copy; source.finalize on the device

From a torch Dataset, worker *processes* run ``__getitem__`` and the collate, and the batch
comes back through shared memory (see ``pipeline/processes.py``). A plain ``TensorDataset``
(no ``collate_fn``) is read like arrays instead: one gather per tensor per chunk, in threads.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from stoker.config import LoaderConfig
from stoker.device.transfer import PendingBatch, Transfer
from stoker.errors import ConfigError, EmptyDatasetError, StateError
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.collate import BF16, default_collate, fetch, flatten, unflatten
from stoker.pipeline.processes import ProcessPool, process_map
from stoker.pipeline.sampler import FixedBatches, Sampler, order_name
from stoker.pipeline.stages import BatchSource, StoreSource, chunk_size, chunked
from stoker.pipeline.threads import default_workers, ordered_map
from stoker.store.reader import Store

STATE_VERSION = 1


def _tensor_columns(data: Any) -> ArrayColumns | None:
    """A plain ``TensorDataset`` of CPU tensors as array columns: one gather per tensor per chunk
    instead of ``__getitem__`` per sample in worker processes (else None: a subclass may change
    ``__getitem__``; bfloat16 and GPU tensors have no numpy view)."""
    if type(data) is not torch.utils.data.TensorDataset or not data.tensors:
        return None
    if any(t.device.type != "cpu" or t.dtype == torch.bfloat16 for t in data.tensors):
        return None
    return ArrayColumns({str(i): t.detach().numpy() for i, t in enumerate(data.tensors)}, positional=True)


def _distributed() -> tuple[int, int]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class Loader:
    """Iterate batches of ``data`` as dicts of tensors on ``device``.

    Args:
        data: a :class:`stoker.Store` or its path, a batch source (``stoker.text``,
            ``stoker.vision``, ...), or a map-style torch ``Dataset`` (``__len__`` and
            ``__getitem__``), which worker processes read.
        batch_size, shuffle, drop_last, device, num_workers, pin_memory, prefetch_factor,
        collate_fn, timeout: as in ``torch.utils.data.DataLoader``. For a store or a source,
            ``collate_fn`` receives each numpy batch (a dict) in a worker thread and returns the
            batch to move; for a Dataset it receives the list of samples, as in torch.
        batch_sampler: an object deciding the batches instead of batch_size/shuffle/drop_last
            (see :class:`stoker.pipeline.sampler.FixedBatches` for the protocol).
        **options: the other fields of :class:`stoker.LoaderConfig` (``seed``, ``rank``,
            ``world_size``, ``uneven``, ``block_size``, ``window``, ``columns``, ``pad_value``,
            ``pad_to_multiple_of``, ``persistent_workers``).

    Rows inside a store batch come in storage order; which rows form each batch follows the
    (shuffled) sampler. ``state_dict()`` records the batches delivered so far, and
    ``load_state_dict()`` resumes right after them, with any number of workers.

    ``stage_hook`` (off by default, ``None``): a callable ``hook(stage) -> context manager`` that
    observers such as ``stoker doctor`` set on an instance. When set, each stage of each batch
    runs inside ``with hook(stage):`` -- ``"read"``, ``"collate"`` and ``"transfer"`` (from_numpy,
    pin, start of the host-to-device copy) in the worker, ``"h2d_wait"`` and ``"finalize"`` in the
    consumer. When it is ``None`` the only cost is one attribute test per chunk and per batch.
    The loader never imports its observers.
    """

    stage_hook: Callable[[str], Any] | None = None

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
        batch_sampler: Any = None,
        **options: Any,
    ) -> None:
        self.config = cfg = LoaderConfig.from_options(
            batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, device=device, num_workers=num_workers,
            pin_memory=pin_memory, prefetch_factor=prefetch_factor, timeout=timeout, **options,
        )  # fmt: skip
        if collate_fn is not None and not callable(collate_fn):
            raise ConfigError(f"collate_fn must be callable, got {collate_fn!r}", option="collate_fn")
        self.collate_fn = collate_fn
        self.transfer = Transfer(cfg.device, cfg.pin_memory)
        self.source = self._as_source(data)
        if len(self.source) == 0:
            raise EmptyDatasetError(f"{_describe(self.source)} has no rows; there is nothing to load")
        if batch_sampler is None:
            rank, world = _distributed()
            sampler = Sampler(
                len(self.source), order_name(cfg.shuffle), cfg.seed, cfg.block_size, cfg.window,
                rank if cfg.rank is None else cfg.rank, world if cfg.world_size is None else cfg.world_size, cfg.uneven,
            )  # fmt: skip
            batch_sampler = FixedBatches(sampler, cfg.batch_size, cfg.drop_last)
        elif batch_size != 1 or shuffle or drop_last:
            raise ConfigError("batch_sampler decides the batches: leave batch_size, shuffle and drop_last unset", option="batch_sampler")
        self.batch_sampler = batch_sampler
        if len(self.batch_sampler) == 0:
            raise EmptyDatasetError(f"this loader has no batch: {len(self.source)} rows, batch_size={cfg.batch_size}, drop_last={cfg.drop_last}")
        self._epoch = 0
        self._done = 0  # batches delivered in the current epoch
        self._pool: ProcessPool | None = None  # worker processes kept between epochs (persistent_workers)
        self._finalizer: weakref.finalize | None = None

    def close(self) -> None:
        """Stop worker processes kept between epochs (``persistent_workers``). Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        self._pool = self._finalizer = None

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _as_source(self, data: Any) -> Any:
        cfg = self.config
        if isinstance(data, (str, os.PathLike)):
            data = Store(data)
        if isinstance(data, Store):
            return StoreSource(data, self.transfer.pool, cfg.columns or tuple(data.schema), cfg.pad_value, cfg.pad_to_multiple_of)
        columns = _tensor_columns(data) if self.collate_fn is None else None
        if columns is not None:  # the TensorDataset habit, read batch-level in threads
            data = columns
        if isinstance(data, BatchSource):
            use_buffers = getattr(data, "use_buffers", None)
            if use_buffers is not None:
                use_buffers(self.transfer.pool)  # pinned staging on CUDA: no extra copy before the H2D copy
            return data
        if hasattr(data, "__getitem__") and hasattr(data, "__len__"):
            return data
        if isinstance(data, torch.utils.data.IterableDataset) or hasattr(data, "__iter__"):
            raise ConfigError("stoker.Loader takes map-style data (with __len__ and __getitem__); an iterable dataset has no random access", option="data")
        raise ConfigError(f"cannot load from {type(data).__name__}; pass a store, its path, a batch source or a map-style Dataset", option="data")

    @property
    def num_workers(self) -> int:
        """The workers this loader uses: ``num_workers``, or the source's choice when it was None."""
        if self.config.num_workers is not None:
            return self.config.num_workers
        auto = getattr(self.source, "auto_workers", None)
        return auto(self.config.batch_size) if auto is not None else default_workers()

    # -- sizes and positions ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.batch_sampler)

    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Start the next iteration at the beginning of ``epoch`` (like DistributedSampler.set_epoch)."""
        if epoch < 0:
            raise ConfigError(f"epoch must be >= 0, got {epoch}", option="epoch")
        self._epoch, self._done = int(epoch), 0

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands: the next ``__iter__`` resumes right after the last batch delivered."""
        return {"version": STATE_VERSION, "epoch": self._epoch, "batches_done": self._done, "order": self.batch_sampler.fingerprint()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise StateError(f"not a stoker loader state (version {STATE_VERSION}): {state!r:.200}")
        self.batch_sampler.check_fingerprint(state["order"])
        done = int(state["batches_done"])
        if not 0 <= done <= len(self):
            raise StateError(f"cannot resume at batch {done}: an epoch has {len(self)} batches")
        self._epoch, self._done = int(state["epoch"]), done

    # -- iteration ------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        cfg = self.config
        if self._done >= len(self):  # the last epoch was finished: go on with the next
            self._epoch, self._done = self._epoch + 1, 0
        epoch = self._epoch
        set_epoch = getattr(self.source, "set_epoch", None)
        if isinstance(self.source, BatchSource) and callable(set_epoch):
            set_epoch(epoch)  # a source's per-row randomness (augmentation) derives from the epoch
        index_batches = self.batch_sampler.batches(epoch, self._done)
        workers = self.num_workers
        timeout = cfg.timeout or None
        if isinstance(self.source, BatchSource):
            hint = getattr(self.source, "batch_bytes", None)
            per_chunk = chunk_size(hint(cfg.batch_size)) if hint else 1
            chunks = ordered_map(
                self._work, chunked(index_batches, per_chunk), workers=workers,
                depth=max(1, workers) * cfg.prefetch_factor, stage="read", timeout=timeout,
            )  # fmt: skip
            started: Iterator[Any] = (item for chunk in chunks for item in chunk)
        else:
            chunks = None
            started = self._dataset_batches(index_batches, workers, timeout)
        finalize = getattr(self.source, "finalize", None)
        hook = self.stage_hook
        try:
            for item in started:
                if hook is None:
                    batch = self._finish(item)
                    if finalize is not None:
                        batch = finalize(batch)
                else:
                    batch = self._finish_observed(item, finalize, hook)
                self._done += 1
                yield batch
        finally:
            started.close()
            if chunks is not None:
                chunks.close()
        if self._done >= len(self):
            self._epoch, self._done = epoch + 1, 0

    def _work(self, chunk: list[np.ndarray]) -> list[tuple[Any, PendingBatch]]:
        hook = self.stage_hook
        if hook is not None:
            return self._work_observed(chunk, hook)
        batches = self.source.read(chunk)
        if self.collate_fn is not None:
            batches = [self.collate_fn(b) for b in batches]
        return [self._start(b) for b in batches]

    def _work_observed(self, chunk: list[np.ndarray], hook: Callable[[str], Any]) -> list[tuple[Any, PendingBatch]]:
        """``_work`` with each stage inside ``hook(stage)`` (see ``stage_hook``)."""
        with hook("read"):
            batches = self.source.read(chunk)
        if self.collate_fn is not None:
            with hook("collate"):
                batches = [self.collate_fn(b) for b in batches]
        with hook("transfer"):
            return [self._start(b) for b in batches]

    def _finish_observed(self, item: tuple[Any, PendingBatch], finalize: Callable[[Any], Any] | None, hook: Callable[[str], Any]) -> Any:
        with hook("h2d_wait"):
            batch = self._finish(item)
        if finalize is not None:
            with hook("finalize"):
                batch = finalize(batch)
        return batch

    def _start(self, batch: Any) -> tuple[Any, PendingBatch]:
        """Begin moving a batch (any nest of dicts, lists and tuples) to the device."""
        if isinstance(batch, dict) and not any(isinstance(v, (dict, tuple, BF16)) for v in batch.values()):
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
        depth = workers * self.config.prefetch_factor
        hook = self.stage_hook
        if workers == 0:
            collate = self.collate_fn or default_collate
            if hook is None:
                produced = (collate(fetch(self.source, [int(i) for i in idx])) for idx in index_batches)
            else:
                produced = _observed_inline(self.source, index_batches, collate, hook)
        elif self.config.persistent_workers:
            if self._pool is None:
                self._pool = ProcessPool(self.source, workers, self.collate_fn)
                self._finalizer = weakref.finalize(self, self._pool.close)
            produced = self._pool.map(index_batches, depth=depth, timeout=timeout)
        else:
            produced = process_map(self.source, index_batches, workers=workers, depth=depth, collate_fn=self.collate_fn, timeout=timeout)
        try:
            for batch in produced:
                if hook is None:
                    yield self._start(batch)
                else:
                    with hook("transfer"):
                        started = self._start(batch)
                    yield started
        finally:
            produced.close()


def _observed_inline(source: Any, index_batches: Iterator[np.ndarray], collate: Callable[[Any], Any], hook: Callable[[str], Any]) -> Iterator[Any]:
    """Dataset batches read in the calling thread, each stage inside ``hook(stage)``."""
    for idx in index_batches:
        with hook("read"):
            samples = fetch(source, [int(i) for i in idx])
        with hook("collate"):
            batch = collate(samples)
        yield batch


def _leaf(value: Any) -> Any:
    if isinstance(value, BF16):
        return torch.from_numpy(value.bits).view(torch.bfloat16)
    return value


def _describe(data: Any) -> str:
    store = getattr(data, "store", None)
    return repr(store) if isinstance(store, Store) else f"the {type(data).__name__}"
