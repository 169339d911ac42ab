"""The ways an :class:`~stoker.vision.source.ImageSource` makes a batch of images, one object each.

``CpuDecode`` (encoded bytes: decode, crop, resample), ``RenderArrays`` (a resized store's rows: crop,
resample, flip), ``GatherArrays`` (rows already at the batch's size and layout: one gather) and
``GpuDecode`` (``vision/gpu.py``). A reader's entry point is ``read_batch(idx, out) -> (batch, kept)``:
``idx`` are row numbers in the batch's order, ``out`` the uint8 buffer to fill (``None`` when
``fills_buffer`` is False), ``kept`` the rows the batch holds. Per-row work goes through one loop,
:meth:`RowErrors.each_row`, which names the file of a bad row or leaves the row out and records it.
Encoded rows come from :class:`StoreBytes` (a store column) or :class:`FileBytes` (image files).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from stoker.store.reader import Store
from stoker.vision.decode import probe, read_file
from stoker.vision.draws import RowRandom
from stoker.vision.errors import ImageError
from stoker.vision.finder import ImageList
from stoker.vision.render import render_array, render_bytes

if TYPE_CHECKING:
    from stoker.vision.options import ImageOptions


@dataclass(frozen=True)
class Skipped:
    """One row left out by ``on_error="skip"``: where it came from and why."""

    row: int
    file: str
    reason: str


WARNED_ROWS = 5  # on_error="skip": the first rows left out are each named in a warning


class RowErrors:
    """What a bad row does: an ImageError naming its file and row, or a :class:`Skipped` record
    (the first :data:`WARNED_ROWS` of them also in a warning, so no row goes missing silently).

    Thread-safe: several workers run :meth:`each_row` at once and share one report.
    """

    def __init__(self, on_error: str, describe: Callable[[int], str]) -> None:
        self.on_error = on_error
        self.describe = describe
        self._lock = threading.Lock()
        self._skipped: dict[int, Skipped] = {}
        self._told = 0  # rows left out and warned of (the first WARNED_ROWS)

    def each_row(self, idx: np.ndarray, work: Callable[[int, int], None]) -> np.ndarray:
        """Run ``work(k, row)`` for each row of ``idx``; the mask of the rows that succeeded.

        An :class:`ImageError` from ``work`` is raised again naming the row's file (``on_error="raise"``)
        or recorded and the row left out (``on_error="skip"``). Any other exception is a bug and passes.
        """
        keep = np.ones(len(idx), dtype=bool)
        for k, row in enumerate(idx.tolist()):
            try:
                work(k, row)
            except ImageError as exc:
                place = self.describe(row)
                if self.on_error == "raise":
                    raise exc.where(place, row) from exc
                with self._lock:
                    self._skipped[row] = Skipped(row, place, exc.reason)
                    told = self._told = self._told + 1
                if told <= WARNED_ROWS:
                    more = "; further rows left out are not warned of" if told == WARNED_ROWS else ""
                    warnings.warn(
                        f"on_error='skip' left out row {row}, {place}: {exc.reason} (the batch is one row short; "
                        f"its 'index' names the rows kept, source.report() all rows left out{more})",
                        stacklevel=2,
                    )
                keep[k] = False
        return keep

    def report(self) -> list[Skipped]:
        """The rows left out so far, in row order."""
        with self._lock:
            return [self._skipped[r] for r in sorted(self._skipped)]

    def drain(self) -> list[Skipped]:
        """The rows left out since the last call, forgotten here (a worker process's copy sends them
        to the consumer's, see :meth:`merge`)."""
        with self._lock:
            rows, self._skipped = list(self._skipped.values()), {}
        return rows

    def merge(self, rows: list[Skipped]) -> None:
        """Record rows another copy (a worker process's) left out."""
        with self._lock:
            self._skipped.update((s.row, s) for s in rows)


class Blobs(Protocol):
    """The encoded images of a batch by position: ``blobs[k]`` is the bytes of row ``idx[k]``."""

    def __getitem__(self, k: int) -> bytes: ...

    def __len__(self) -> int: ...


class StoreBytes:
    """The encoded images of a store column: one gather per batch."""

    def __init__(self, store: Store, column: str) -> None:
        self.store, self.column = store, column

    def fetch(self, idx: np.ndarray) -> Blobs:
        """The bytes of the rows ``idx``, indexed by position in the batch."""
        return self.store.gather(idx, [self.column])[self.column]


class _LazyFiles:
    """Position ``k`` reads file ``paths[idx[k]]`` when asked, inside the per-row loop."""

    def __init__(self, paths: Sequence[str], idx: np.ndarray) -> None:
        self.paths, self.idx = paths, idx

    def __getitem__(self, k: int) -> bytes:
        return read_file(self.paths[int(self.idx[k])])

    def __len__(self) -> int:
        return len(self.idx)


class FileBytes:
    """The encoded images of a list of files: each read in its row's turn, so a bad file is that row's error."""

    def __init__(self, images: ImageList) -> None:
        self.images = images

    def fetch(self, idx: np.ndarray) -> Blobs:
        return _LazyFiles(self.images.paths, idx)


Encoded = StoreBytes | FileBytes


class ImageReader:
    """One way of making the images of a batch; see the module docstring.

    Attributes:
        fills_buffer: whether ``read_batch`` writes into the uint8 buffer it is given.
        holds_gil: whether making a batch runs Python per row (each row takes the GIL back several
            times), rather than one long GIL-free call per batch (``pipeline/schedule.py`` then
            prefers worker processes).
    """

    fills_buffer: ClassVar[bool] = True
    holds_gil: ClassVar[bool] = False

    def read_batch(self, idx: np.ndarray, out: np.ndarray | None) -> tuple[dict[str, Any], np.ndarray]:
        """The images of rows ``idx`` (in that order) and the rows kept; ``out`` is the batch's uint8 buffer."""
        raise NotImplementedError(f"{type(self).__name__} must define read_batch")

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Device-side work after the copy (none here)."""
        return batch

    def _buffer(self, out: np.ndarray | None) -> np.ndarray:
        """``out``, which a reader that ``fills_buffer`` is always given."""
        if out is None:
            raise TypeError(f"{type(self).__name__}.read_batch fills a uint8 buffer: pass it as out")
        return out

    def __repr__(self) -> str:
        return type(self).__name__


def _kept(out: np.ndarray, idx: np.ndarray, keep: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    if keep.all():
        return {"image": out}, idx
    return {"image": out[keep]}, idx[keep]


class CpuDecode(ImageReader):
    """Encoded bytes -> header probe, crop plan, decode at the smallest scale covering the box, resample."""

    holds_gil: ClassVar[bool] = True

    def __init__(self, encoded: Encoded, options: ImageOptions, rng: RowRandom, errors: RowErrors) -> None:
        self.encoded, self.options, self.rng, self.errors = encoded, options, rng, errors

    def read_batch(self, idx: np.ndarray, out: np.ndarray | None) -> tuple[dict[str, Any], np.ndarray]:
        opts = self.options
        out = self._buffer(out)
        blobs = self.encoded.fetch(idx)
        channels_first = opts.layout == "NCHW"
        draws = self.rng.rows(idx)
        plan, interpolation = opts.transforms.plan, opts.transforms.interpolation
        max_pixels, reduce = opts.max_pixels, opts.reduced_decode

        def work(k: int, row: int) -> None:
            data = blobs[k]
            info = probe(data, max_pixels)
            view = plan(info.height, info.width, None if draws is None else draws[k])
            render_bytes(data, info, view, interpolation, out[k], channels_first, reduce)

        return _kept(out, idx, self.errors.each_row(idx, work))


class RenderArrays(ImageReader):
    """uint8 rows of a resized store (CHW or HWC) -> the planned crop, resampled and flipped."""

    holds_gil: ClassVar[bool] = True

    def __init__(
        self, store: Store, column: str, chw: bool, options: ImageOptions, rng: RowRandom, errors: RowErrors
    ) -> None:
        self.store, self.column, self.chw = store, column, chw
        self.options, self.rng, self.errors = options, rng, errors

    def read_batch(self, idx: np.ndarray, out: np.ndarray | None) -> tuple[dict[str, Any], np.ndarray]:
        opts = self.options
        out = self._buffer(out)
        arrays = self.store.gather(idx, [self.column])[self.column]
        channels_first = opts.layout == "NCHW"
        draws = self.rng.rows(idx)

        def work(k: int, row: int) -> None:
            view_rng = None if draws is None else draws[k]
            chw = arrays[k] if self.chw else arrays[k].transpose(2, 0, 1)
            view = opts.transforms.plan(chw.shape[1], chw.shape[2], view_rng)
            render_array(chw, view, opts.transforms.interpolation, out[k], channels_first)

        return _kept(out, idx, self.errors.each_row(idx, work))


class GatherArrays(ImageReader):
    """uint8 rows stored at the batch's size and layout -> one gather into the buffer."""

    def __init__(self, store: Store, column: str) -> None:
        self.store, self.column = store, column

    def read_batch(self, idx: np.ndarray, out: np.ndarray | None) -> tuple[dict[str, Any], np.ndarray]:
        out = self._buffer(out)
        self.store.gather(idx, [self.column], {self.column: out})
        return {"image": out}, idx


__all__ = [
    "CpuDecode",
    "FileBytes",
    "GatherArrays",
    "ImageReader",
    "RenderArrays",
    "RowErrors",
    "RowRandom",
    "Skipped",
    "StoreBytes",
]
