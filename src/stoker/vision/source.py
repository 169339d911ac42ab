"""``ImageSource``: a batch source that turns image rows into fixed-size uint8 batches.

It reads an *encoded* store (JPEG bytes), a *resized* store (uint8 arrays) or image files (a folder,
a list of paths, an ImageFolder object). Workers run ``read`` (decode, crop, resample into a recycled
uint8 buffer); the consumer runs ``finalize`` after the copy (the device ops, uint8 -> float/half and
Normalize as one batch operation on the device). Usage: ``stoker.vision``'s docstring.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stoker.device.buffers import BufferPool
from stoker.errors import ConfigError
from stoker.labels import label_map
from stoker.pipeline.columns import check_rows
from stoker.pipeline.ranks import files_fingerprint, store_fingerprint
from stoker.pipeline.schedule import Costs
from stoker.pipeline.source import BatchSource
from stoker.pipeline.threads import one_torch_thread_here
from stoker.store.reader import Store
from stoker.vision.augment import Augment
from stoker.vision.compose import as_compose
from stoker.vision.finder import ImageList, find_images
from stoker.vision.gpu import GpuDecode, gpu_available
from stoker.vision.options import ImageOptions
from stoker.vision.readers import (
    CpuDecode,
    FileBytes,
    GatherArrays,
    ImageReader,
    RenderArrays,
    RowErrors,
    RowRandom,
    Skipped,
    StoreBytes,
)


def _check_store_classes(store: Store, names: Sequence[str]) -> None:
    """Refuse a label map that is not the one ``store`` was written with (its labels are codes of that one)."""
    written = store.metadata.get("classes")
    if written is None or list(written) != list(names):
        have = "no class names" if written is None else f"the classes {list(written)}"
        raise ConfigError(
            f"{store.path} was written with {have}, not the given label map {list(names)}; its labels are "
            "codes of the map it was written with: convert the images again with label_names= (or "
            "--label-names-from TRAIN_STORE), or leave the map out",
            option="label_names",
        )


def _is_store(data: Any) -> bool:
    return isinstance(data, Store) or (
        isinstance(data, (str, os.PathLike)) and (Path(data) / "manifest.json").is_file()
    )


def _array_layout(store: Store, column: str) -> tuple[bool, tuple[int, int]] | None:
    """For a column of decoded uint8 images: (stored CHW?, (height, width)); None for encoded bytes."""
    col = store.schema.get(column)
    if col is None:
        raise ConfigError(
            f"{store.path} has no column {column!r}; its columns are {list(store.schema)}", option="image_column"
        )
    if col.kind == "binary":
        return None
    shape = col.shape if col.kind == "tensor" and col.dtype == "uint8" else None
    if shape is not None and len(shape) == 3 and 3 in (shape[0], shape[2]):
        chw = store.metadata.get("layout", "CHW" if shape[0] == 3 else "HWC") == "CHW"
        return chw, ((shape[1], shape[2]) if chw else (shape[0], shape[1]))
    raise ConfigError(
        f"column {column!r} of {store.path} is {col}; expected JPEG bytes or uint8 images", option="image_column"
    )


PATH_COLUMN = "path"  # each row's source file in stores written by stoker.convert.images


class ImageSource(BatchSource):
    """Batches of images (and labels) from a store or from image files; see the module docstring.

    The way a batch is made is chosen once, here, as a reader (``vision/readers.py``): CPU decode of
    encoded bytes, rendering of a resized store's rows, a plain gather of rows already at the batch's
    size, or nvJPEG decode on the GPU. ``source.reader`` is the one chosen.

    Args:
        data: a store (or its path) written by ``stoker.convert.images``; or a folder, a list of
            paths, an :class:`~stoker.vision.finder.ImageList` or an ImageFolder-like object.
        transforms: geometric transforms (+ Normalize); see :class:`ImageOptions`.
        labels: for a flat folder: a CSV/JSON labels file or a mapping file -> label.
        label_names, class_to_idx: image files: the class map (names in id order, or a dict name ->
            id) to number labels by, as ``stoker.convert.images`` takes it (a val folder missing a
            class numbers the others as train did); a store: checked against the classes it was
            written with (a store's labels are written codes, never renumbered here).
        image_column, label_column: the store columns to read.
        with_paths: also put each row's source file in the batch, as ``batch["path"]`` (a list of str);
            by default the ``path`` column is not read.
        **options: the other fields of :class:`ImageOptions`.
    """

    def __init__(
        self,
        data: Any,
        transforms: Any = None,
        *,
        labels: Any = None,
        label_names: Sequence[str] | None = None,
        class_to_idx: Mapping[str, int] | None = None,
        image_column: str = "image",
        label_column: str = "label",
        with_paths: bool = False,
        **options: Any,
    ) -> None:
        self.options = opts = ImageOptions(transforms=as_compose(transforms), **options)
        self._pool = BufferPool()
        self._threads = threading.local()  # per worker thread: torch limited to one thread there
        self.image_column, self.label_column = image_column, label_column
        self.with_paths = bool(with_paths)
        self._data: Store | ImageList  # where the rows come from: see the ``store`` and ``images`` properties
        self._labels: np.ndarray | None = None  # the labels of image files (a store's are gathered per batch)
        arrays = None
        names = label_map(label_names, class_to_idx)
        if _is_store(data):
            self._data = store = data if isinstance(data, Store) else Store(data)
            arrays = _array_layout(store, image_column)
            self.has_labels = label_column in store.schema
            if with_paths and PATH_COLUMN not in store.schema:
                raise ConfigError(
                    f"with_paths=True: {store.path} has no {PATH_COLUMN!r} column (it was written before stores "
                    "kept each image's file); convert the images again, or pass with_paths=False",
                    option="with_paths",
                )
            if names is not None:
                _check_store_classes(store, names)
        else:
            self._data = images = find_images(data, labels, names=names)
            self.has_labels = images.labels is not None
            if images.labels is not None:
                self._labels = np.asarray(images.labels, dtype=np.int64)
        size = opts.transforms.out_size(arrays[1] if arrays is not None else None)
        if size is None:
            raise ConfigError(
                "the transforms do not end at a fixed size, so images cannot be batched: end them with "
                "CenterCrop, RandomResizedCrop, RandomCrop or Resize((height, width))",
                option="transforms",
            )
        self.size = size
        self._row_shape = (3, *size) if opts.layout == "NCHW" else (*size, 3)  # one image of a batch
        seed = 0 if opts.seed is None else opts.seed  # None: the loader's, told by set_seed
        self.rng = RowRandom(seed, opts.transforms.random)  # rng(row): the row's generator this epoch
        self.errors = RowErrors(opts.on_error, self.describe)
        self.reader = self._choose_reader(arrays)
        self.augment = Augment(
            opts.transforms,
            seed=seed,
            layout=opts.layout,
            dtype=opts.dtype,
            in_workers=self.reader.fills_buffer,
            labeled=self.has_labels,
        )

    def _choose_reader(self, arrays: tuple[bool, tuple[int, int]] | None) -> ImageReader:
        opts, column, data = self.options, self.image_column, self._data
        encoded: StoreBytes | FileBytes
        if not isinstance(data, Store):
            encoded = FileBytes(data)
        elif arrays is None:
            encoded = StoreBytes(data, column)
        else:
            if opts.decode_device == "cuda":
                raise ConfigError(
                    "decode_device='cuda' decodes JPEG; this store holds decoded arrays", option="decode_device"
                )
            chw = arrays[0]
            same_layout = chw == (opts.layout == "NCHW")  # a 3x3 image's shape alone does not say
            if not opts.transforms.geometric and same_layout and data.schema[column].shape == self._row_shape:
                return GatherArrays(data, column)
            return RenderArrays(data, column, chw, opts, self.rng, self.errors)
        if opts.decode_device == "cuda":
            reason = gpu_available()
            if reason is not None:
                raise ConfigError(
                    f"decode_device='cuda' needs CUDA and torchvision: {reason}; use decode_device='cpu'",
                    option="decode_device",
                )
            return GpuDecode(encoded, opts, self.size, self.rng, self.errors)
        return CpuDecode(encoded, opts, self.rng, self.errors)

    @property
    def store(self) -> Store | None:
        """The store the rows come from; None when they are image files."""
        return self._data if isinstance(self._data, Store) else None

    @property
    def images(self) -> ImageList | None:
        """The image files the rows come from; None when they come from a store."""
        return self._data if isinstance(self._data, ImageList) else None

    # -- the BatchSource protocol ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self._data)

    @property
    def classes(self) -> list[str] | None:
        """Class names in label-id order (torchvision's ``ImageFolder.classes``); None without classes."""
        if isinstance(self._data, Store):
            return self._data.metadata.get("classes")
        classes = self._data.classes
        return list(classes) if classes is not None else None

    @property
    def label_names(self) -> tuple[str, ...] | None:  # type: ignore[override]
        """Class names in label-id order, as ``stoker.text.Loader.label_names``; None without classes."""
        classes = self.classes
        return None if classes is None else tuple(classes)

    @property
    def class_to_idx(self) -> dict[str, int] | None:
        """Class name -> label id (torchvision's ``ImageFolder.class_to_idx``); None without classes."""
        classes = self.classes
        return None if classes is None else {name: i for i, name in enumerate(classes)}

    def costs(self, batch_size: int) -> Costs:
        """The batch's bytes, and whether the reader holds the GIL (per-row decode and rendering do;
        a plain gather and the GPU decode do not)."""
        return Costs(self.batch_bytes(batch_size), holds_gil=self.reader.holds_gil)

    @property
    def rowwise(self) -> bool:  # type: ignore[override]
        """``BatchSource.rowwise``: CPU readers, unless a batch op (per-batch draws) or a callable in the
        workers (torch's global generator, seeded per task) follows the crop."""
        return self.reader.holds_gil and not self.augment.batch_ops and not self.augment.worker_ops

    def readahead(self, batches: list[np.ndarray]) -> None:
        """A store's image and label bytes of these batches asked of the disk now (``Store.willneed``)."""
        if isinstance(self._data, Store):
            columns = [self.image_column, self.label_column][: 1 + self.has_labels]
            self._data.willneed(np.concatenate(batches), columns)

    def batch_bytes(self, batch_size: int) -> float:
        return float(batch_size * 3 * self.size[0] * self.size[1])

    def use_buffers(self, pool: BufferPool) -> None:
        """Fill image batches from the loader's recycled buffers (pinned when it feeds a GPU)."""
        self._pool = pool

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose randomness the next reads use (the Loader calls this)."""
        self.rng.epoch = int(epoch)

    def set_seed(self, seed: int) -> None:
        """The loader's seed: the base of the per-row randomness, unless ``seed=`` was given here."""
        if self.options.seed is None:
            self.rng.reseed(seed)
            self.augment.seed = seed

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, Any]]:
        return [self.read_batch(np.asarray(idx, dtype=np.int64)) for idx in chunk]

    def read_batch(self, idx: np.ndarray) -> dict[str, Any]:
        """One batch of the rows ``idx``, in that order: the reader's images (in a recycled buffer) and the labels."""
        check_rows(idx, len(self), repr(self))
        worker = threading.current_thread() is not threading.main_thread()
        if worker and not getattr(self._threads, "limited", False):
            one_torch_thread_here()  # worker threads resample in parallel already
            self._threads.limited = True
        out = None
        if self.reader.fills_buffer:
            out = self._pool.get("image", (len(idx), *self._row_shape), np.uint8)
        batch, kept = self.reader.read_batch(idx, out)
        if self.reader.fills_buffer and self.augment.worker_ops:
            self._run_worker_ops(batch["image"], kept)
        batch = self._with_columns(batch, kept)
        self.augment.draw(batch, kept, self.rng.epoch, self.size)
        return batch

    def _run_worker_ops(self, images: np.ndarray, rows: np.ndarray) -> None:
        """The per-sample callables on each row, in place; an error gets a note naming the row's file."""
        for k, row in enumerate(rows.tolist()):
            try:
                self.augment.run_workers(images[k : k + 1])
            except Exception as exc:
                if hasattr(exc, "add_note"):
                    exc.add_note(f"stoker: a transform raised this on row {row} ({self.describe(row)})")
                raise

    def _with_columns(self, batch: dict[str, Any], idx: np.ndarray) -> dict[str, Any]:
        """The labels (and, with ``with_paths``, the files) of the rows ``idx`` kept in ``batch``;
        with ``on_error="skip"`` the rows themselves, as ``index`` (a batch may be short)."""
        if self.options.on_error == "skip":
            batch["index"] = idx.astype(np.int64)
        if self.with_paths:
            batch[PATH_COLUMN] = self.paths(idx)
        if not self.has_labels:
            return batch
        if isinstance(self._data, Store):
            labels = self._data.gather(idx, [self.label_column])[self.label_column]
            batch["label"] = labels.astype(np.int64, copy=False)
        elif self._labels is not None:
            batch["label"] = self._labels[idx]
        return batch

    def describe(self, row: int) -> str:
        """Which file ``row`` is: the file (relative to the root), and for a store the store row too.

        A store written before stores kept the ``path`` column is described by its row alone.
        """
        if isinstance(self._data, ImageList):
            return self._data.name(row)
        if PATH_COLUMN not in self._data.schema:
            return f"{self._data.path} row {row}"
        return f"{self.paths(np.asarray([row]))[0]} ({self._data.path} row {row})"

    def paths(self, rows: np.ndarray) -> list[str]:
        """The source files of ``rows``, relative to the source root when under it (the ``path`` column)."""
        data = self._data
        if isinstance(data, ImageList):
            return [data.name(int(r)) for r in rows]
        if PATH_COLUMN not in data.schema:
            raise ConfigError(
                f"{data.path} has no {PATH_COLUMN!r} column: it was written before stores kept each image's "
                "file; convert the images again (stoker convert images) to trace rows to files",
                option="path",
            )
        return [str(p) for p in data.gather(np.asarray(rows, dtype=np.int64), [PATH_COLUMN])[PATH_COLUMN]]

    @property
    def samples(self) -> list[tuple[str, int | None]]:
        """``(file, label)`` for every row, as torchvision's ``ImageFolder.samples``.

        Files are full paths when the source root is known (from the store's metadata), else as
        stored; the label is None for unlabeled images. Reads the whole ``path`` column once.
        """
        data = self._data
        if isinstance(data, ImageList):
            labels = data.labels if data.labels is not None else [None] * len(data)
            return list(zip(data.paths, labels))
        root = data.metadata.get("root")
        files = self.paths(np.arange(len(data)))
        if root is not None:
            files = [os.path.join(root, f) for f in files]
        labels = (
            data.gather(np.arange(len(data)), [self.label_column])[self.label_column].tolist()
            if self.has_labels
            else [None] * len(files)
        )
        return list(zip(files, labels))

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        """On the device: the reader's device work (GPU decode), then the transforms after the crop
        (batch ops, Normalize, consumer-side callables) and uint8 -> dtype (``vision/augment.py``)."""
        return self.augment.finalize(self.reader.finalize(batch))

    def transform_plan(self) -> list[str]:
        """``"transform -> where it runs"`` for every transform, in order.

        The geometric ones are one planned crop and resample per image (in the workers, or on the
        device with ``decode_device="cuda"``); the rest as ``vision/augment.py`` places them.
        """
        where = "device, one planned crop (finalize)" if not self.reader.fills_buffer else "workers, one planned crop"
        return [f"{type(op).__name__} -> {where}" for op in self.options.transforms.geometric] + self.augment.plan()

    def content_fingerprint(self) -> str:
        """What the ranks compare (``pipeline/ranks.py``): a store's content, or the image files' names,
        sizes, labels and sampled heads (``files_fingerprint``)."""
        data = self._data
        if isinstance(data, Store):
            return store_fingerprint(data)
        return files_fingerprint(data.paths, data.root, data.labels)

    # -- reporting ------------------------------------------------------------------------
    def report(self) -> list[Skipped]:
        """The rows left out so far by ``on_error="skip"``, in row order."""
        return self.errors.report()

    def drain_report(self) -> list[Skipped] | None:
        """In a worker process: the rows this copy left out since the last call."""
        return self.errors.drain() or None

    def merge_report(self, part: list[Skipped]) -> None:
        """In the consumer: the rows a worker process left out."""
        self.errors.merge(part)

    def __repr__(self) -> str:
        data = self._data
        where = data.path if isinstance(data, Store) else (data.root or f"{len(data)} files")
        return (
            f"ImageSource({str(where)!r}, reader={self.reader!r}, rows={len(self)}, size={self.size}, "
            f"layout={self.options.layout}, transforms={self.transform_plan()})"
        )


__all__ = ["ImageOptions", "ImageSource", "Skipped"]
