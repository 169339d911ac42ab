"""The loader's options, frozen and validated in one place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from stoker.errors import ConfigError
from stoker.pipeline.sampler import order_name
from stoker.pipeline.schedule import AUTO, ENGINES  # AUTO: num_workers / prefetch_factor tuned while the loader runs
from stoker.store.sizes import parse_size

IN_BATCH_ORDERS = ("sampled", "storage")


@dataclass(frozen=True)
class LoaderConfig:
    """Every option of :class:`stoker.Loader`. Names follow ``torch.utils.data.DataLoader``.

    Attributes:
        batch_size: rows per batch (> 0).
        shuffle: ``False`` (storage order), ``True``/``"global"`` (a new permutation each
            epoch) or ``"block"`` (shuffle blocks of rows, then rows within a window of blocks;
            for data larger than RAM).
        drop_last: drop the last batch of an epoch when it is short.
        num_workers: workers running the source's ``read`` (threads or processes, see ``engine``);
            ``0`` works in the calling thread; ``None`` for the schedule's default
            (``pipeline/schedule.py``: small batches of a copying source such as a store in the
            calling thread, a remote store ``max(2, cores)``, else one per usable core);
            ``"auto"`` tunes the count while the loader runs (``pipeline/autotune.py``: from the
            default up to 2 per core, added while the consumer waits on busy workers and the
            rate rises, retired when they idle; worker processes too).
        chunk_size: batches per worker task (>= 1); ``None`` sizes chunks to about 1 MiB of data, up to
            64 batches. A pass's first tasks take 1, 2, 4, ... batches up to it, so the first batch comes fast.
        prefetch_factor: chunks of batches in flight per worker; ``"auto"`` tunes it while the loader
            runs (from the default 2, between 1 and 8, deepened while the consumer waits on idle workers and the rate
            rises). Every decision of the tuner is in ``loader.report()`` and told to observers
            (the doctor's trace).
        memory_budget: with ``"auto"`` settings, the most bytes the batches in flight may take
            (``workers x prefetch x batches per chunk x batch bytes``): bytes or a size such as
            ``"2GB"``; ``None`` for no limit. Refused without an ``"auto"`` setting.
        pin_memory: stage batches in pinned memory; ``None`` pins exactly when the device is CUDA.
        device: where batches land: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or ``"auto"``.
        timeout: seconds to wait for one batch before failing (``0`` waits forever).
        seed: base seed of the shuffle; epoch ``e`` uses ``(seed, e)``.
        rank: this process's rank; ``None`` asks torch.distributed when it is initialized, else 0.
        world_size: ranks sharing each epoch; ``None`` as for ``rank``.
        uneven: ``"pad"`` (repeat rows so every rank gets as many) or ``"drop"`` (leave the rest out).
        block_size: rows per block for ``shuffle="block"``; ``None`` sizes it (``pipeline/blocks.py``:
            4096, made smaller where the window does not fit a quarter of the memory limit; a remote
            store larger than its cache: one shard's rows). ``loader.block_order`` says what and why.
        window: blocks shuffled together for ``shuffle="block"``; ``None`` sizes it as ``block_size`` (16 where
            it fits; for a remote store, as many shards as half of ``cache_limit`` holds).
        columns: the store columns to read (default: all): a list, or a mapping
            ``{"train/x": "x"}`` that also renames them in the batch.
        pad_value: padding of sequence columns.
        pad_to_multiple_of: the padded width of a batch's sequence columns is its longest row rounded
            up to a multiple of this; ``None`` for the source's own: a store's exact widths (1), a
            text source's 8 (``stoker.text.Loader`` hands it to its ``TextSource``).
        persistent_workers: keep the workers between epochs until ``close()``: worker processes, and
            worker threads unless ``num_workers="auto"`` resizes them (a pass then starts none).
        engine: where the source's ``read`` runs: ``"threads"``, ``"processes"``, or ``None`` for the
            schedule's default (``pipeline/schedule.py``: processes where the source's reads hold the
            GIL, such as a torch Dataset's ``__getitem__`` or per-image crops, and more than one core is
            usable; else threads). Processes write each batch into a shared-memory slot that is handed
            out with no copy (page-locked once on CUDA). To choose by measurement, ``stoker tune`` times
            both. ``num_workers`` counts workers of either kind. ``loader.schedule`` shows the engine,
            workers, prefetch and chunk size in force and who set each.
        in_batch_order: ``"sampled"`` (rows inside a batch in the sampler's order, as from a torch
            ``DataLoader``) or ``"storage"`` (each batch's rows sorted by row number; which rows form
            a batch still follows the sampler). With ``device="cuda"`` a store's batches are read
            sorted and put back in the sampler's order on the device, after the copy.
        with_index: add ``index`` to every dict batch: each row's number in the loaded data (a
            source that leaves rows out, such as ``ImageSource(on_error="skip")``, gives the rows kept).
    """

    batch_size: int = 1
    shuffle: bool | str = False
    drop_last: bool = False
    num_workers: int | str | None = None
    prefetch_factor: int | str = 2
    pin_memory: bool | None = None
    device: Any = "cpu"
    timeout: float = 0.0
    seed: int = 0
    rank: int | None = None
    world_size: int | None = None
    uneven: str = "pad"
    block_size: int | None = None
    window: int | None = None
    columns: tuple[str, ...] | dict[str, str] | None = None
    pad_value: int | float = 0
    pad_to_multiple_of: int | None = None
    persistent_workers: bool = False
    engine: str | None = None
    memory_budget: int | str | None = None
    chunk_size: int | None = None
    in_batch_order: str = "sampled"
    with_index: bool = False

    def __post_init__(self) -> None:
        def positive_int(name: str, value: Any, minimum: int = 1, auto: bool = False) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                also = f" or {AUTO!r}" if auto else ""
                raise ConfigError(f"{name} must be an integer >= {minimum}{also}, got {value!r}", option=name)

        positive_int("batch_size", self.batch_size)
        if self.in_batch_order not in IN_BATCH_ORDERS:
            raise ConfigError(
                f"in_batch_order must be one of {IN_BATCH_ORDERS}, got {self.in_batch_order!r}", option="in_batch_order"
            )
        if self.prefetch_factor != AUTO:
            positive_int("prefetch_factor", self.prefetch_factor, auto=True)
        for name in ("pad_to_multiple_of", "block_size", "window", "chunk_size"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        if self.num_workers is not None and self.num_workers != AUTO:
            positive_int("num_workers", self.num_workers, 0, auto=True)
        if self.num_workers == 0 and self.prefetch_factor == AUTO:
            raise ConfigError(
                "prefetch_factor='auto' tunes the chunks in flight per worker, and num_workers=0 has no worker: "
                "give workers (a number, None or 'auto') or a fixed prefetch_factor",
                option="prefetch_factor",
            )
        self._check_budget()
        if not isinstance(self.timeout, (int, float)) or self.timeout < 0:
            raise ConfigError(f"timeout must be a number of seconds >= 0, got {self.timeout!r}", option="timeout")
        order_name(self.shuffle)
        if self.engine == AUTO:
            raise ConfigError(
                "engine='auto' is gone: leave engine unset (stoker picks threads or processes from what the "
                "source's reads cost; loader.schedule says which and why) or measure both with `stoker tune`",
                option="engine",
            )
        if self.engine is not None and self.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {ENGINES} or None, not {self.engine!r}", option="engine")
        if self.uneven not in ("pad", "drop"):
            raise ConfigError(f"uneven must be 'pad' or 'drop', not {self.uneven!r}", option="uneven")
        if isinstance(self.columns, str):
            raise ConfigError(
                f"columns must be a list of column names or a mapping {{column: new name}}, got {self.columns!r}",
                option="columns",
            )
        if isinstance(self.columns, Mapping):
            object.__setattr__(self, "columns", dict(self.columns))  # a mapping renames (StoreSource checks it)
        elif self.columns is not None:
            object.__setattr__(self, "columns", tuple(self.columns))

    def _check_budget(self) -> None:
        budget = self.memory_budget
        if budget is None:
            return
        if AUTO not in (self.num_workers, self.prefetch_factor):  # no "auto" setting: the online tuner is off
            raise ConfigError(
                f"memory_budget={budget!r} bounds what online tuning adds; it needs num_workers='auto' or "
                "prefetch_factor='auto' (with fixed settings the bytes in flight are fixed too)",
                option="memory_budget",
            )
        try:
            size = parse_size(budget)
        except ConfigError:
            raise ConfigError(
                f"memory_budget must be a positive number of bytes or a size like '2GB', not {budget!r}",
                option="memory_budget",
            ) from None
        object.__setattr__(self, "memory_budget", size)

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    @classmethod
    def from_options(cls, **options: Any) -> LoaderConfig:
        unknown = set(options) - cls.names()
        if unknown:
            hints = "".join(f"; {name}: {TORCH_ONLY[name]}" for name in sorted(unknown) if name in TORCH_ONLY)
            raise ConfigError(
                f"unknown loader option(s) {sorted(unknown)}{hints}; the options are {sorted(cls.names())}",
                option=sorted(unknown)[0],
            )
        return cls(**options)


# torch DataLoader keywords a stoker Loader does not take, and what does their job here
TORCH_ONLY = {
    "sampler": "the loader orders rows itself (shuffle=, seed=; rank=/world_size= replace a DistributedSampler); "
    "for an order of your own pass batch_sampler= a stoker.BatchSampler",
    "generator": "the order comes from seed= (the same seed gives the same batches)",
    "worker_init_fn": "worker processes seed random, numpy and torch themselves, per task from (seed, epoch, "
    "batch), which is what a worker_init_fn usually does; other per-process setup belongs in the Dataset",
    "multiprocessing_context": "worker processes are forked (engine='processes'); engine='threads' starts none",
    "pin_memory_device": "device= says where batches go (pinned staging buffers on CUDA)",
    "in_order": "batches always come in the sampler's order (one order whatever the workers)",
}
