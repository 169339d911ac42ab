"""``stoker.Loader``: batches from a store, any batch source, or any map-style torch Dataset.

Every input becomes a :class:`~stoker.pipeline.source.BatchSource` (a store a ``StoreSource``, a
torch Dataset a ``DatasetSource``, a plain ``TensorDataset`` array columns), and every source
runs through one loop::

    batch sampler (consumer)          index arrays for this rank and epoch, grouped in chunks
      -> source.read     (worker)     one read for the chunk, into recycled (pinned) buffers
      -> collate         (worker)     collate_fn, or the source's own collate
      -> Transfer.start  (worker)     torch.from_numpy; on CUDA the copy on a side stream
      -> Transfer.finish (consumer)   wait for that copy; then source.finalize on the device

How the reads run is the loader's :class:`~stoker.pipeline.schedule.Schedule`, decided in one place
(``pipeline/schedule.py``) and moved while a pass runs by the online tuner (``pipeline/autotune.py``)
for ``"auto"`` settings. With processes, workers write batches into shared-memory slots
(``pipeline/slots.py``) and ``Transfer.start`` runs in the consumer on views of the slot, no copy.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from functools import partial
from time import perf_counter
from typing import Any

from stoker.config import LoaderConfig
from stoker.device.transfer import Transfer
from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.autotune import AutoTuner, TuneReport, tuner_for  # the online tuner of "auto" settings
from stoker.pipeline.blocks import block_order
from stoker.pipeline.dataset_source import DatasetSource
from stoker.pipeline.executor import Executor, first_parts, pass_tasks, peek
from stoker.pipeline.inputs import as_source, describe
from stoker.pipeline.memory import Memory, tree_memory
from stoker.pipeline.observe import REGISTRY, Handle, LoaderInfo, Observer, Observers, public_name, qualified_name
from stoker.pipeline.passes import OnePass
from stoker.pipeline.ranks import check_agreement, data_fingerprint, shares_process_group
from stoker.pipeline.ranks import distributed_rank as distributed_rank  # its old home; text/lightning import it here
from stoker.pipeline.sampler import BatchSampler, FixedBatches, Sampler, order_name
from stoker.pipeline.schedule import TUNER, Schedule, decide
from stoker.pipeline.slots import SlotBuffers, SlotPlan
from stoker.pipeline.source import overrides
from stoker.pipeline.state import Position
from stoker.pipeline.store_source import StoreSource
from stoker.pipeline.work import Work, begin_copy, finished, read_order

_LOADER_IDS = itertools.count(1)  # LoaderInfo.loader_id: unique in a process, unlike id(), which is reused


class Loader:
    """Iterate batches of ``data`` as dicts of tensors on ``device``.

    Args:
        data: a :class:`stoker.Store` or its path, a :class:`stoker.BatchSource` (``stoker.text``,
            ``stoker.vision``, ``stoker.sources``, your own), or a map-style torch ``Dataset``
            (``__len__`` and ``__getitem__``), which worker processes read.
        batch_size, shuffle, drop_last, device, num_workers, pin_memory, prefetch_factor,
        collate_fn, timeout: as in ``torch.utils.data.DataLoader``. ``collate_fn`` receives what
            the source's ``read`` returns for one batch: the list of samples for a Dataset (as
            in torch), the numpy batch (a dict) for a store or a source.
        batch_sampler: a :class:`stoker.BatchSampler` deciding the batches instead of
            batch_size/shuffle/drop_last.
        **options: the other fields of :class:`stoker.LoaderConfig` (``seed``, ``rank``, ``world_size``,
            ``columns``, ``engine``, ...); ``num_workers="auto"``/``prefetch_factor="auto"`` tune while it runs.

    Rows inside a batch come in the sampler's order, as from a torch ``DataLoader``
    (``in_batch_order="storage"`` sorts them; ``with_index=True`` adds each row's number as ``index``).
    Each pass (``for batch in loader``) starts from the first batch of a new
    epoch, as each pass of a DataLoader draws a new order: a pass left early (a peek, a ``break``)
    still used up its epoch, and nothing of it carries over. ``set_epoch(e)`` chooses the epoch of
    the next pass. ``state_dict()`` records the epoch and the batches delivered so far; after
    ``load_state_dict()`` the next pass (only that one) continues right after them, with any
    number of workers.
    """

    def __init__(
        self,
        data: Any,
        batch_size: int = 1,
        *,
        shuffle: bool | str = False,
        drop_last: bool = False,
        device: Any = "cpu",
        num_workers: int | str | None = None,
        pin_memory: bool | None = None,
        prefetch_factor: int | str = 2,
        collate_fn: Callable[[Any], Any] | None = None,
        timeout: float = 0.0,
        batch_sampler: BatchSampler | None = None,
        **options: Any,
    ) -> None:
        self.config = cfg = LoaderConfig.from_options(
            batch_size=batch_size,
            shuffle=shuffle,
            drop_last=drop_last,
            device=device,
            num_workers=num_workers,
            pin_memory=pin_memory,
            prefetch_factor=prefetch_factor,
            timeout=timeout,
            **options,
        )
        if collate_fn is not None and not callable(collate_fn):
            raise ConfigError(f"collate_fn must be callable, got {collate_fn!r}", option="collate_fn")
        self.collate_fn = collate_fn
        self.transfer = Transfer(cfg.device, cfg.pin_memory)
        self.source = as_source(data, cfg.columns, cfg.pad_value, cfg.pad_to_multiple_of, collate_fn)
        if len(self.source) == 0:
            raise EmptyDatasetError(f"{describe(self.source)} has no rows; there is nothing to load")
        pin = None if cfg.pin_memory is None else self.transfer.pin_memory
        self._schedule = decide(
            self.source.costs(cfg.batch_size),
            cfg.engine,
            cfg.num_workers,
            cfg.prefetch_factor,
            cfg.chunk_size,
            pin,
            self.transfer.is_cuda,
        )
        # Process workers fill shared-memory slots (page-locked on CUDA); threads the pinned pool.
        self._slot_buffers = SlotBuffers()
        self.source.use_buffers(self.transfer.pool if self.engine == "threads" else self._slot_buffers)
        blocks = block_order(self.source, cfg.block_size, cfg.window, order_name(cfg.shuffle))
        self.block_order = None if batch_sampler is not None else blocks  # shuffle="block"'s sizes, and why
        if batch_sampler is None:
            rank, world = distributed_rank(cfg.rank, cfg.world_size)
            sampler = Sampler(
                len(self.source), order_name(cfg.shuffle), cfg.seed, *blocks.sizes, rank, world, cfg.uneven
            )
            batch_sampler = FixedBatches(sampler, cfg.batch_size, cfg.drop_last)
        elif batch_size != 1 or shuffle or drop_last:
            raise ConfigError(
                "batch_sampler decides the batches: leave batch_size, shuffle and drop_last unset",
                option="batch_sampler",
            )
        elif not isinstance(batch_sampler, BatchSampler):
            raise ConfigError(
                f"batch_sampler must subclass stoker.BatchSampler, got {type(batch_sampler).__name__}",
                option="batch_sampler",
            )
        self.batch_sampler = batch_sampler
        if len(self.batch_sampler) == 0:
            raise EmptyDatasetError(
                f"this loader has no batch: {len(self.source)} rows, batch_size={cfg.batch_size}, drop_last={cfg.drop_last}"
            )
        self._position = Position()
        self._agreed = False  # the ranks were found to agree (checked at the first pass)
        self._executor: Executor | None = None  # kept between epochs only with persistent_workers
        self._finalizer: weakref.finalize | None = None
        self._passes = OnePass(f"this {type(self).__name__}")
        self._tuner = tuner_for(cfg, self._schedule)  # None unless a setting is "auto"
        self.observers = Observers(self._info(), [])
        if self._tuner is not None:
            self._tuner.on_decision = self.observers.tuned  # not the loader: no reference cycle
        for observer in REGISTRY.current():
            self.observers.add(observer)

    def _info(self) -> LoaderInfo:
        inner = self.source.dataset if isinstance(self.source, DatasetSource) else self.source
        qualified = qualified_name(type(inner))
        what = repr(self.source.store.url) if isinstance(self.source, StoreSource) else public_name(type(inner))
        return LoaderInfo(
            loader_id=os.getpid() * 1_000_000 + next(_LOADER_IDS),
            name=f"{type(self).__module__.split('.')[0]}.Loader({what})",
            source=qualified,
            source_id=id(inner),
            engine=self.engine,
            num_workers=self.num_workers,
            batch_size=self.config.batch_size if isinstance(self.batch_sampler, FixedBatches) else None,
            prefetch_factor=self.prefetch_factor,
            pin_memory=self.transfer.pin_memory,
            device=str(self.transfer.device),
            store=isinstance(self.source, StoreSource),
            persistent_workers=self.config.persistent_workers,
            schedule=str(self.schedule),
        )

    def register_observer(self, observer: Observer) -> Handle:
        """Attach ``observer`` to this loader (see :mod:`stoker.pipeline.observe`); ``remove()`` detaches it.

        Worker processes already started (``persistent_workers``) do not see a later registration.
        """
        return self.observers.add(observer)

    def close(self) -> None:
        """Stop worker processes kept between epochs (``persistent_workers``) and release what the
        source holds (``BatchSource.close``: a text source's token cache and background pass; a later
        pass starts them again). Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        self._executor = self._finalizer = None
        self.source.close()

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """The names of the label ids in id order (the source's), or None."""
        return self.source.label_names

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schedule(self) -> Schedule:
        """How this loader reads now (engine, workers, prefetch, chunk size, pinning) and who set each
        setting: you, the defaults (``pipeline/schedule.py``) or the online tuner."""
        return self._schedule if self._tuner is None else self._tuner.applied(self._schedule)

    @property
    def engine(self) -> str:
        """Where the reads run: ``"threads"`` or ``"processes"``."""
        return self._schedule.engine

    @property
    def num_workers(self) -> int:
        """The workers this loader uses now (:attr:`schedule`)."""
        return self.schedule.workers

    @property
    def prefetch_factor(self) -> int:
        """Chunks in flight per worker now (:attr:`schedule`)."""
        return self.schedule.prefetch

    def report(self) -> Any:
        """What the source counted so far (see its ``report``), or None.

        With ``"auto"`` settings, a :class:`~stoker.pipeline.autotune.TuneReport`: the tuner's settings
        and decisions, the source's report in ``.inner``.
        """
        inner = self.source.report()
        return inner if self.tuning is None else replace(self.tuning, inner=inner)

    def memory(self) -> Memory:
        """This process's memory and its worker processes', now: PSS counts a page they share once."""
        return tree_memory()

    @property
    def tuning(self) -> TuneReport | None:
        """The online tuner's settings now and its decisions (with ``"auto"`` settings), else None."""
        return None if self._tuner is None else self._tuner.report()

    # -- sizes and positions ------------------------------------------------------------------
    def __len__(self) -> int:
        """Batches in one epoch for this rank (``drop_last`` and the rank split counted)."""
        return len(self.batch_sampler)

    @property
    def epoch(self) -> int:
        """During a pass, its epoch; after a whole pass, the epoch the next pass reads (a pass left
        early keeps its epoch here, and the next pass takes the one after it)."""
        return self._position.epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass the whole of ``epoch`` (like DistributedSampler.set_epoch)."""
        if epoch < 0:
            raise ConfigError(f"epoch must be >= 0, got {epoch}", option="epoch")
        self._position.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Where the loader stands: small, JSON-able, and the same shape on every rank.

        ``epoch``; ``start``, the position in the epoch where the current count of batches began;
        ``world_size``, the ranks that count ran on; ``batches_done``, the batches each of them
        delivered since; ``order``, the batch sampler's fingerprint (seed, order, rows, batch size,
        ...). With the default batch sampler a position counts rows of the epoch's global order,
        which every rank computes alike and which does not depend on the world size: every field
        is global, none depends on the rank. So the state of any rank (rank 0's, the usual
        checkpoint) resumes every rank, and a state saved on ``N`` ranks resumes on ``M``: the rest
        of the epoch is split again over the ``M`` ranks, every row once (``pipeline/sampler.py``).
        A batch sampler without global positions (``BatchSampler``'s defaults) counts this rank's
        batches instead; its fingerprint then holds its rank and world size, which must match.
        """
        return self._position.state(self.batch_sampler)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (see ``state_dict``): the next ``iter`` starts right after the
        batches it counts, on this rank of this loader's world size."""
        self._position.load(state, self.batch_sampler)

    def _check_ranks(self) -> None:
        """Under torch.distributed, check once that every rank loads the same rows in the same order
        settings (``pipeline/ranks.py``); a rank that differs fails every rank, named."""
        bs, cfg = self.batch_sampler, self.config
        if shares_process_group(getattr(bs, "rank", None), getattr(bs, "world_size", None)):
            facts = {
                "rows": len(self.source),
                "data": data_fingerprint(self.source),
                "batches per epoch": len(bs),
                "seed": cfg.seed,
                "shuffle": order_name(cfg.shuffle),
                "batch_size": cfg.batch_size,
                "drop_last": cfg.drop_last,
                "order": {k: v for k, v in bs.fingerprint().items() if k != "rank"},
            }
            check_agreement(facts, f"a Loader of {describe(self.source)}")
        self._agreed = True

    # -- iteration ------------------------------------------------------------------------------
    def _executor_for(self, schedule: Schedule, per_chunk: int, tuner: AutoTuner | None) -> Executor:
        cfg = self.config
        if tuner is not None and schedule.engine == "processes":
            # busy share from the tasks outstanding (not timed here)
            schedule = schedule.with_(TUNER, workers=tuner.for_processes())
        cached, knobs = self._executor, None if tuner is None else tuner.knobs
        if cached is not None and cached.serves(schedule, knobs):
            return cached
        in_threads = schedule.engine == "threads" or schedule.workers == 0
        collate = self.collate_fn or (self.source.collate if overrides(self.source, "collate") else None)
        work = Work(
            self.source,
            collate,
            self.observers,
            None if not in_threads else partial(begin_copy, self.transfer),
            not in_threads,
            cfg.seed,
            read_order(cfg.in_batch_order, self.transfer.reorders, self.source, self.collate_fn, cfg.batch_size),
            cfg.with_index,
        )
        batch_bytes = self.source.batch_bytes(cfg.batch_size)
        slots = SlotPlan(
            self._slot_buffers,
            None if batch_bytes is None else int(batch_bytes * per_chunk) + 2**16,
            self.transfer.is_cuda and self.transfer.pin_memory,
        )
        # the tuner times the tasks of worker threads (a process's tasks are not timed here)
        timed = work if tuner is None or schedule.engine == "processes" else tuner.timed(work)
        executor = Executor(timed, schedule, cfg.timeout or None, "read", cfg.persistent_workers, slots, knobs)
        if cfg.persistent_workers:
            self.close()
            self._executor = executor
            self._finalizer = weakref.finalize(self, executor.close)
        return executor

    def __iter__(self) -> Iterator[Any]:
        # One pass at a time: a pass still running in another thread is refused, an abandoned one closed.
        return self._passes.start(self._pass)

    def _pass(self) -> Generator[Any, None, None]:
        sampler, position = self.batch_sampler, self._position
        epoch, left = position.begin_pass(sampler)
        if not self._agreed:
            self._check_ranks()
        self.source.set_epoch(epoch)  # per-row randomness (augmentation) derives from the epoch; see Work
        schedule, tuner = self.schedule, self._tuner
        if tuner is not None and not tuner.steers(schedule.workers):
            tuner = None  # no worker, and none to add: the online tuner has nothing to steer in this pass
        # Chunks of 1, 2, 4, ... batches up to chunk_size or the source's size; the first batch first
        # (read in parts over the workers, its rows asked of the disk at once): pipeline/executor.py.
        source, cfg = self.source, self.config
        sized = partial(source.batch_bytes, cfg.batch_size)
        ahead = source.upcoming if overrides(source, "upcoming") else None  # e.g. remote shards
        first, batches = peek(sampler.batches_from(epoch, position.begin))
        split = source.rowwise and self.collate_fn is None and cfg.in_batch_order == "sampled"
        parts = first_parts(first, schedule.workers) if split else 1
        readahead = source.readahead if overrides(source, "readahead") else None
        # a fetching source (remote store) learns half a window ahead (README, remote stores: reading)
        half = sampler.window_batches() // 2 if ahead is not None and source.costs(cfg.batch_size).fetches else 0
        window = max(1, schedule.workers) * schedule.prefetch
        per_chunk, tasks = pass_tasks(epoch, batches, sized, ahead, schedule.chunk, half, parts, readahead, window)
        if tuner is not None:  # the settings learned by earlier passes carry over
            tuner.begin_pass(per_chunk, sized())
        executor = self._executor_for(schedule, per_chunk, tuner)
        results = executor.map(tasks)
        observers = self.observers
        span = observers.span
        finalize = source.finalize if overrides(source, "finalize") else None
        handed = None if tuner is None else tuner.handed
        try:
            requested = perf_counter()
            for batch in finished(results, self.transfer, executor.in_processes, source.merge_report, span, parts):
                if finalize is not None:
                    with span("finalize"):
                        batch = finalize(batch)
                position.done += 1
                ready = perf_counter()
                if observers:
                    observers.batch(requested, ready, batch)
                if handed is not None:
                    handed(ready - requested, batch)
                yield batch
                requested = perf_counter()
        finally:
            results.close()
        position.end_pass(epoch, left)
