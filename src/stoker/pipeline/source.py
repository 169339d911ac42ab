"""``BatchSource``: the one contract of everything a :class:`stoker.Loader` reads.

A source turns chunks of row-index arrays into batches. The loader calls, per epoch::

    source.set_seed(seed)                        the loader's seed, before any read (copied by forked workers)
    source.set_epoch(epoch)                      main thread, before the first read
    source.readahead(batches)                    main thread, the first batches of a pass, before their reads
    source.upcoming(batches)                     main thread, batches ahead of the reads in flight
    source.read(chunk)        -> raw batches     a worker (thread or process), many at once
    collate_fn or source.collate(raw) -> batch   the same worker
    source.finalize(batch)    -> batch           the consumer, after the copy to the device

Only ``__len__`` and ``read`` must be written; every other hook has a default here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.pipeline.schedule import Costs

Batch = dict[str, Any]


class BatchSource:
    """Base class of every batch source: stores, text, images, HDF5, arrays, torch Datasets.

    Subclass it and write ``__len__`` and ``read``; override the other hooks where the default
    does not fit. ``read`` runs in several workers at once: it must be thread-safe, and its heavy
    work should release the GIL (numpy, Arrow, tokenizers, libjpeg-turbo) when it runs in threads.
    A source reports what its reads cost (:meth:`costs`); it never chooses workers or the engine:
    the loader's schedule does (``pipeline/schedule.py``).

    Attributes:
        label_names: the names of the label ids its batches carry, in id order (``loader.label_names``),
            or None (no labels, or numeric ones).
        rowwise: each row of a batch is made on its own (its data and its random draws its own, no
            padding or draw per batch, reads that do more than copy): a batch read in parts of
            consecutive rows, joined, is the batch read whole. The loader then reads the first batch of
            a pass in parts, one per worker, so that it comes as soon as the workers together make it.
    """

    label_names: tuple[str, ...] | None = None
    rowwise: bool = False

    def __len__(self) -> int:
        """Rows in the source."""
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def read(self, chunk: list[np.ndarray]) -> list[Any]:
        """One raw batch per index array of ``chunk`` (consecutive batches of this epoch).

        An error about a row should name it (the file, the row number) in its message.
        """
        raise NotImplementedError(f"{type(self).__name__} must define read(chunk)")

    def collate(self, raw: Any) -> Any:
        """Turn what ``read`` returned for one batch into the batch to move (identity here).

        Used when the user passes no ``collate_fn``; a user's ``collate_fn`` replaces it.
        """
        return raw

    def upcoming(self, batches: list[np.ndarray]) -> None:
        """The index arrays of batches the loader will read soon, in order, each announced once and
        before the read that holds it (see ``pass_tasks``): a source that fetches its data (a remote
        store) can start fetching them now. Called in the consumer; the default does nothing."""

    def readahead(self, batches: list[np.ndarray]) -> None:
        """The first batches of a pass (those the workers take first), each told once, the first before
        any worker starts: a source whose rows may lie on disk uncached asks for all of them now (a
        store: ``Store.willneed``), so its first reads wait for one queue of reads, not a page fault at
        a time. Called in the consumer; the default does nothing."""

    def batch_bytes(self, batch_size: int) -> float | None:
        """Expected host bytes of one batch, or None when unknown. Sizes the chunks of work."""
        return None

    def costs(self, batch_size: int) -> Costs:
        """What reading a batch of ``batch_size`` rows costs (:class:`~stoker.pipeline.schedule.Costs`):
        the loader's default schedule is made from it. The default knows only :meth:`batch_bytes`."""
        return Costs(self.batch_bytes(batch_size))

    def use_buffers(self, pool: BufferPool) -> None:
        """Receive the loader's recycled host buffers (pinned when it feeds a GPU).

        A source that fills its arrays from ``pool.get`` is copied to the device with no extra
        staging copy. The default ignores the pool.
        """

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the reads that follow (per-row randomness such as augmentation)."""

    def set_seed(self, seed: int) -> None:
        """The loader's ``seed``, told before its reads (wherever they run): a source with per-row
        randomness of its own (augmentation) may draw from it, so one seed decides the order and
        the draws. The default ignores it."""

    def finalize(self, batch: Any) -> Any:
        """Consumer-side work after the copy to the device (e.g. normalize on the GPU)."""
        return batch

    def close(self) -> None:
        """Release what the source holds beyond its reads (temporary files, background threads);
        a later read may start them again. ``Loader.close()`` calls it; the default does nothing."""

    def report(self) -> Any:
        """What the source counted so far (skipped rows, padding, ...), or None."""
        return None

    def drain_report(self) -> Any:
        """In a worker process: what this copy counted since the last call (then forgotten here), for
        :meth:`merge_report` in the consumer's copy; None when there is nothing to carry (default)."""
        return None

    def merge_report(self, part: Any) -> None:
        """In the consumer: add a worker process's :meth:`drain_report` to this copy's counts."""


def overrides(source: BatchSource, hook: str) -> bool:
    """Whether ``source`` defines ``hook`` itself rather than inheriting the default."""
    return getattr(type(source), hook) is not getattr(BatchSource, hook)


__all__ = ["Batch", "BatchSource", "overrides"]
