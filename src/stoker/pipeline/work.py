"""``Work``: what a loader's worker (thread or process) does with one task of a pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stoker.pipeline.observe import Observers
from stoker.pipeline.source import BatchSource


class Work:
    """What a worker does with one task ``(epoch, first, chunk)``: read, collate, and (threads) start
    the copy. ``first`` is the number of the chunk's first batch in the epoch (errors name it).

    The epoch travels with each task so that a source in a worker process kept between epochs
    (``persistent_workers``) learns it too: ``set_epoch`` runs wherever ``read`` runs.
    """

    def __init__(
        self,
        source: BatchSource,
        collate: Callable[[Any], Any] | None,
        observers: Observers,
        start: Callable[[Any], Any] | None,
        in_process: bool = False,
    ) -> None:
        self.source, self.collate, self.observers, self.start = source, collate, observers, start
        self.in_process = in_process  # return (batches, source.drain_report()): the counts travel back
        self.epoch: int | None = None

    def __call__(self, task: tuple[int, int, list[np.ndarray]]) -> Any:
        epoch, _, chunk = task
        if epoch != self.epoch:
            self.source.set_epoch(epoch)
            self.epoch = epoch
        span = self.observers.span
        with span("read"):
            batches = self.source.read(chunk)
        if self.collate is not None:
            with span("collate"):
                batches = [self.collate(b) for b in batches]
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


__all__ = ["Work"]
