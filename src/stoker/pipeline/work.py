"""``Work``: what a loader's worker (thread or process) does with one task of a pass; ``begin_copy``
and ``finish_copy``: a batch of any nest of dicts, lists and tuples onto the device; ``finished``:
a pass's results onto the device, in order."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from stoker.device.transfer import PendingBatch, Transfer
from stoker.pipeline.collate import BF16, flatten, join_rows, unflatten
from stoker.pipeline.observe import Observers
from stoker.pipeline.source import BatchSource
from stoker.store.gather import ascending_order


class Work:
    """What a worker does with one task ``(epoch, first, chunk)``: read, collate, and (threads) start
    the copy. ``first`` is the number of the chunk's first batch in the epoch (errors name it).

    The epoch travels with each task so that a source in a worker process kept between epochs
    (``persistent_workers``) learns it too: ``set_epoch`` runs wherever ``read`` runs.

    In a worker process (``in_process``) each task first seeds the process's global generators
    (Python's ``random``, numpy's legacy ``np.random``, torch's) from ``(seed, epoch, first)``
    (:func:`seed_globals`). Forked workers start as copies of the consumer, generators included, and
    a pool forked again each epoch starts from the same state: without this, two workers drew the
    same "random" augmentations, and every epoch repeated the last one's. Seeding per task, not per
    worker, also makes the draws of a batch independent of which worker reads it.

    ``in_batch_order="storage"`` sorts each batch's rows before the read (``LoaderConfig``);
    ``"reorder"`` (the loader's choice for ``"sampled"``, :func:`read_order`) sorts them too, and
    each batch travels as a :class:`Reordered` that the copy puts back in the sampler's order.
    ``with_index`` adds ``index`` (the batch's rows) to each dict batch (after the collate) that
    has none of its own.
    """

    def __init__(
        self,
        source: BatchSource,
        collate: Callable[[Any], Any] | None,
        observers: Observers,
        start: Callable[[Any], Any] | None,
        in_process: bool = False,
        seed: int = 0,
        in_batch_order: str = "sampled",
        with_index: bool = False,
    ) -> None:
        self.source, self.collate, self.observers, self.start = source, collate, observers, start
        self.in_process = in_process  # return (batches, source.drain_report()): the counts travel back
        self.seed = seed
        self.sort_rows, self.with_index = in_batch_order in ("storage", REORDER), with_index
        self.reorders = in_batch_order == REORDER
        self.epoch: int | None = None
        source.set_seed(seed)  # before the workers start: forked ones copy it

    def __call__(self, task: tuple[int, int, list[np.ndarray]]) -> Any:
        epoch, first, chunk = task
        if self.in_process:
            seed_globals(self.seed, epoch, first)
        if epoch != self.epoch:
            self.source.set_epoch(epoch)
            self.epoch = epoch
        span = self.observers.span
        backs: list[np.ndarray | None] = []
        if self.reorders:
            pairs = [storage_order(rows) for rows in chunk]
            chunk, backs = [rows for rows, _ in pairs], [back for _, back in pairs]
        elif self.sort_rows:
            chunk = [np.sort(rows) for rows in chunk]
        with span("read"):
            batches = self.source.read(chunk)
        if self.collate is not None:
            with span("collate"):
                batches = [self.collate(b) for b in batches]
        if self.with_index:
            batches = [with_index(b, rows) for b, rows in zip(batches, chunk)]
        if backs:
            batches = [b if back is None else Reordered(b, back) for b, back in zip(batches, backs)]
        if self.start is not None:
            with span("transfer"):
                batches = [self.start(b) for b in batches]
        if self.in_process:
            return batches, self.source.drain_report()
        return batches

    @staticmethod
    def describe(task: tuple[int, int, list[np.ndarray]] | None) -> tuple[int, str]:
        """``(first batch, words)`` naming a task in errors: ``"batch 12 of this pass (epoch 0)"``."""
        if task is None:
            return -1, "a batch"
        epoch, first, chunk = task
        which = f"batch {first}" if len(chunk) == 1 else f"batches {first}-{first + len(chunk) - 1}"
        return first, f"{which} of this pass (epoch {epoch})"


REORDER = "reorder"


class Reordered(NamedTuple):
    """A batch read in storage order and ``back``, the rows that put it in the sampler's order."""

    batch: Any
    back: np.ndarray


def read_order(in_batch_order: str, reorders: bool, source: BatchSource, collate: Any, batch_size: int) -> str:
    """How a loader's workers order a batch's rows: ``in_batch_order``, or :data:`REORDER` for
    ``"sampled"`` where the transfer ``reorders`` after the copy (on a GPU) and the source's reads
    are gathers (a shuffled gather over several shards costs more than a sorted one on the host:
    docs/in-batch-order.md). Not with a user's ``collate_fn``, whose output may not be rows."""
    if in_batch_order == "sampled" and reorders and collate is None and source.costs(batch_size).copies:
        return REORDER
    return in_batch_order


def storage_order(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """``rows`` sorted, and ``back`` with ``sorted[back] == rows`` (None when already sorted)."""
    rows = np.asarray(rows)
    if ascending_order(rows):
        return rows, None
    order = np.argsort(rows, kind="stable")
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return rows[order], back


def with_index(batch: Any, rows: np.ndarray) -> Any:
    """``batch`` with ``index``: its rows (int64), unless the source put its own (rows it kept)."""
    if isinstance(batch, dict) and "index" not in batch:
        batch["index"] = np.asarray(rows, dtype=np.int64)
    return batch


def seed_globals(seed: int, epoch: int, first: int) -> None:
    """Seed this process's global generators (``random``, ``np.random``, torch's, where imported)
    from ``(seed, epoch, first)``: the same task gets the same draws, different tasks different ones."""
    state = np.random.SeedSequence([seed % 2**64, epoch, first]).generate_state(2, np.uint32)
    value = int(state[0]) << 32 | int(state[1])
    random.seed(value)
    np.random.seed(int(state[0]))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(value)


def begin_copy(transfer: Transfer, batch: Any) -> tuple[Any, PendingBatch]:
    """Begin moving ``batch`` to the transfer's device: ``(spec to rebuild it or None, pending)``.
    A :class:`Reordered` batch is put back in the sampler's order after the copy."""
    back = None
    if isinstance(batch, Reordered):
        batch, back = batch
    if isinstance(batch, dict) and not any(isinstance(v, (dict, tuple, BF16)) for v in batch.values()):
        return None, transfer.start(batch, back)
    leaves, spec = flatten(batch)
    return spec, transfer.start({str(i): _leaf(x) for i, x in enumerate(leaves)}, back)


def finished(
    results: Iterable[Any],
    transfer: Transfer,
    in_processes: bool,
    merge_report: Callable[[Any], None],
    span: Any,
    parts: int,
) -> Iterator[Any]:
    """The batches of a pass's ``results`` (one list of batches per task; with worker processes, with the
    counts the worker's copy of the source made, for ``merge_report``), copied to the device, in order.
    The first ``parts`` results are the parts of the first batch (``pass_tasks``), joined into one."""
    pieces: list[Any] = []
    for chunk in results:
        if in_processes:
            chunk, counts = chunk
            if counts is not None:
                merge_report(counts)
        for item in chunk:
            if in_processes:
                with span("transfer"):
                    item = begin_copy(transfer, item)
            with span("h2d_wait"):
                batch = finish_copy(transfer, item)
            if parts > 1:
                pieces.append(batch)
                if len(pieces) < parts:
                    continue
                batch, pieces, parts = join_rows(pieces), [], 1
            yield batch


def finish_copy(transfer: Transfer, started: tuple[Any, PendingBatch]) -> Any:
    """Wait for :func:`begin_copy`'s copies and rebuild the batch."""
    spec, pending = started
    tensors = transfer.finish(pending)
    if spec is None:
        return tensors
    return unflatten(spec, [tensors[str(i)] for i in range(len(tensors))])


def _leaf(value: Any) -> Any:
    if isinstance(value, BF16):
        import torch

        return torch.from_numpy(value.bits).view(torch.bfloat16)
    return value


__all__ = ["REORDER", "Reordered", "Work", "begin_copy", "finish_copy", "finished", "read_order", "storage_order"]
