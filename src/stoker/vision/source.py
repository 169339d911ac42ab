"""``ImageSource``: a batch source that turns image rows into fixed-size uint8 batches.

It reads from an *encoded* store (JPEG bytes), a *resized* store (uint8 arrays), or straight
from image files (a folder, a list of paths, an ImageFolder object), and plugs into
``stoker.Loader`` as a :class:`~stoker.pipeline.stages.BatchSource`::

    source = ImageSource("stores/photos", train_transforms(224))
    for batch in stoker.Loader(source, batch_size=256, shuffle=True, device="cuda"):
        batch["image"]  # float32 (256, 3, 224, 224), normalized on the device
        batch["label"]  # int64 (256,)

Workers run ``read`` (decode, crop, resample into a recycled uint8 buffer, without the GIL
for the heavy parts); the consumer runs ``finalize`` after the copy: uint8 -> float/half and
Normalize as one batch operation on the device.
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stoker.device.buffers import BufferPool
from stoker.errors import ConfigError
from stoker.store.reader import Store
from stoker.vision.decode import DEFAULT_MAX_PIXELS, probe, read_file
from stoker.vision.errors import ImageError
from stoker.pipeline.threads import default_workers, one_torch_thread_here
from stoker.vision.render import render_array, render_bytes
from stoker.vision.finder import ImageList, find_images
from stoker.vision.transforms import Compose, as_compose

_DTYPES = {"uint8": torch.uint8, "float32": torch.float32, "float": torch.float32, "float16": torch.float16, "half": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class ImageOptions:
    """How an ImageSource makes its batches.

    Attributes:
        transforms: a :class:`~stoker.vision.transforms.Compose` (or list) of geometric ops, then
            an optional Normalize; they must end at a fixed size.
        layout: ``"NCHW"`` (torch's default) or ``"NHWC"`` for the image batches.
        dtype: the image dtype after ``finalize``: None means float32 when Normalize is given,
            else uint8; a float dtype without Normalize scales to [0, 1].
        seed: base of the per-row randomness: row ``i`` of epoch ``e`` uses ``(seed, e, i)``.
        on_error: ``"raise"`` (an ImageError naming the file) or ``"skip"`` (leave the row out
            of its batch and list it in :meth:`ImageSource.report`).
        max_pixels: images larger than this are refused as enormous.
        reduced_decode: decode JPEG at 1/2, 1/4, 1/8 scale when that still covers the crop.
        decode_device: ``"cpu"``, or ``"cuda"`` to decode JPEG with nvJPEG
            (``torchvision.io.decode_jpeg``) and resample on the GPU in ``finalize``.
    """

    transforms: Compose = field(default_factory=Compose)
    layout: str = "NCHW"
    dtype: Any = None
    seed: int = 0
    on_error: str = "raise"
    max_pixels: int = DEFAULT_MAX_PIXELS
    reduced_decode: bool = True
    decode_device: str = "cpu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "transforms", as_compose(self.transforms))
        if self.layout not in ("NCHW", "NHWC"):
            raise ConfigError(f"layout must be 'NCHW' or 'NHWC', not {self.layout!r}", option="layout")
        if self.on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', not {self.on_error!r}", option="on_error")
        dtype = self.dtype
        if isinstance(dtype, str):
            if dtype not in _DTYPES:
                raise ConfigError(f"dtype must be one of {sorted(_DTYPES)} or a torch dtype, not {dtype!r}", option="dtype")
            dtype = _DTYPES[dtype]
        if dtype is None:
            dtype = torch.float32 if self.transforms.normalize is not None else torch.uint8
        if not isinstance(dtype, torch.dtype):
            raise ConfigError(f"dtype must be a torch dtype or a name like 'float16', not {self.dtype!r}", option="dtype")
        if self.transforms.normalize is not None and not dtype.is_floating_point:
            raise ConfigError(f"Normalize needs a floating dtype, not {dtype}", option="dtype")
        object.__setattr__(self, "dtype", dtype)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, not {self.seed!r}", option="seed")
        if not isinstance(self.max_pixels, int) or self.max_pixels <= 0:
            raise ConfigError(f"max_pixels must be a positive integer, not {self.max_pixels!r}", option="max_pixels")
        if self.decode_device not in ("cpu", "cuda"):
            raise ConfigError(f"decode_device must be 'cpu' or 'cuda', not {self.decode_device!r}", option="decode_device")


@dataclass(frozen=True)
class Skipped:
    """One row left out by ``on_error="skip"``: where it came from and why."""

    row: int
    file: str
    reason: str


def _is_store(data: Any) -> bool:
    return isinstance(data, Store) or (isinstance(data, (str, os.PathLike)) and (Path(data) / "manifest.json").is_file())


MAX_AUTO_WORKERS = 8  # see ImageSource.auto_workers


class ImageSource:
    """Batches of images (and labels) from a store or from image files; see the module docstring.

    Args:
        data: a store (or its path) written by ``stoker.convert.images``; or a folder, a list of
            paths, an :class:`~stoker.vision.finder.ImageList` or an ImageFolder-like object.
        transforms: geometric transforms (+ Normalize); see :class:`ImageOptions`.
        labels: for a flat folder: a CSV/JSON labels file or a mapping file -> label.
        image_column, label_column: the store columns to read.
        **options: the other fields of :class:`ImageOptions`.
    """

    def __init__(self, data: Any, transforms: Any = None, *, labels: Any = None, image_column: str = "image",
                 label_column: str = "label", **options: Any) -> None:  # fmt: skip
        self.options = opts = ImageOptions(transforms=as_compose(transforms), **options)
        self._pool = BufferPool()
        self._lock = threading.Lock()
        self._threads = threading.local()  # per worker thread: torch limited to one thread there
        self._skipped: dict[int, Skipped] = {}
        self._epoch = 0
        self._norm_cache: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self.store: Store | None = None
        self.images: ImageList | None = None
        in_size = None
        if _is_store(data):
            self.store = data if isinstance(data, Store) else Store(data)
            col = self.store.schema.get(image_column)
            if col is None:
                raise ConfigError(f"{self.store.path} has no column {image_column!r}; its columns are {list(self.store.schema)}", option="image_column")
            if col.kind == "binary":
                self.kind = "encoded"
            elif col.kind == "tensor" and col.dtype == "uint8" and len(col.shape) == 3 and 3 in (col.shape[0], col.shape[2]):
                self.kind = "array"
                self._chw = self.store.metadata.get("layout", "CHW" if col.shape[0] == 3 else "HWC") == "CHW"
                in_size = tuple(col.shape[1:]) if self._chw else tuple(col.shape[:2])
            else:
                raise ConfigError(f"column {image_column!r} of {self.store.path} is {col}; expected JPEG bytes or uint8 images", option="image_column")
            self.has_labels = label_column in self.store.schema
        else:
            self.kind = "files"
            self.images = find_images(data, labels)
            self.has_labels = self.images.labels is not None
            self._labels = np.asarray(self.images.labels, dtype=np.int64) if self.has_labels else None
        self.image_column, self.label_column = image_column, label_column
        size = opts.transforms.out_size(in_size)
        if size is None:
            raise ConfigError(
                "the transforms do not end at a fixed size, so images cannot be batched: end them with "
                "CenterCrop, RandomResizedCrop, RandomCrop or Resize((height, width))",
                option="transforms",
            )
        self.size = size
        self._identity = self.kind == "array" and not opts.transforms.geometric and self._chw == (opts.layout == "NCHW")
        self._gpu = None
        if opts.decode_device == "cuda":
            from stoker.vision.gpu import GpuDecoder

            if self.kind == "array":
                raise ConfigError("decode_device='cuda' decodes JPEG; this store holds decoded arrays", option="decode_device")
            self._gpu = GpuDecoder(self)

    # -- the BatchSource protocol ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self.store) if self.store is not None else len(self.images)

    @property
    def classes(self) -> list[str] | None:
        if self.store is not None:
            return self.store.metadata.get("classes")
        return list(self.images.classes) if self.images.classes is not None else None

    def auto_workers(self, batch_size: int) -> int:
        """Threads when the user does not say: one per core, at most ``MAX_AUTO_WORKERS``.

        Decode releases the GIL and scales with threads, but the per-image work as a whole
        (decode, crop, resample) stopped scaling past 8 threads on a 16-core H100 host (cause
        not established; benchmarks/bench_jpeg_threads.py there, encoded store, batches of 128:
        472 img/s with 1 thread, 2,102 with 4, 2,426 with 8, 1,909 with 16).
        """
        return default_workers(MAX_AUTO_WORKERS)

    def batch_bytes(self, batch_size: int) -> float:
        return float(batch_size * 3 * self.size[0] * self.size[1])

    def use_buffers(self, pool: BufferPool) -> None:
        """Fill image batches from the loader's recycled buffers (pinned when it feeds a GPU)."""
        self._pool = pool

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose randomness the next reads use (the Loader calls this)."""
        self._epoch = int(epoch)

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, Any]]:
        return [self.read_batch(np.sort(np.asarray(idx, dtype=np.int64))) for idx in chunk]

    def read_batch(self, idx: np.ndarray) -> dict[str, Any]:
        if not getattr(self._threads, "limited", False) and threading.current_thread() is not threading.main_thread():
            one_torch_thread_here()  # worker threads resample in parallel already
            self._threads.limited = True
        if self._gpu is not None:
            return self._gpu.read(idx)
        opts = self.options
        h, w = self.size
        shape = (len(idx), 3, h, w) if opts.layout == "NCHW" else (len(idx), h, w, 3)
        if self._identity and self.store.schema[self.image_column].shape == shape[1:]:
            buf = self._pool.get("image", shape, np.uint8)
            self.store.gather(idx, [self.image_column], {self.image_column: buf})
            return self._with_labels({"image": buf}, idx)
        buf = self._pool.get("image", shape, np.uint8)
        out = torch.from_numpy(buf)
        keep = np.ones(len(idx), dtype=bool)
        blobs = self.store.gather(idx, [self.image_column])[self.image_column] if self.store is not None else None
        channels_first = opts.layout == "NCHW"
        for k, row in enumerate(idx.tolist()):
            try:
                view_rng = self.rng(row)
                if self.kind == "array":
                    chw = blobs[k] if self._chw else blobs[k].transpose(2, 0, 1)
                    view = opts.transforms.plan(chw.shape[1], chw.shape[2], view_rng)
                    render_array(chw, view, opts.transforms.interpolation, out[k], channels_first)
                    continue
                data = blobs[k] if blobs is not None else read_file(self.images.paths[row])
                info = probe(data, opts.max_pixels)
                view = opts.transforms.plan(info.height, info.width, view_rng)
                render_bytes(data, info, view, opts.transforms.interpolation, out[k], channels_first, opts.reduced_decode)
            except ImageError as exc:
                err = exc.where(self.describe(row), row)
                if opts.on_error == "raise":
                    raise err from exc
                with self._lock:
                    self._skipped[row] = Skipped(row, self.describe(row), exc.reason)
                keep[k] = False
        batch = {"image": buf if keep.all() else buf[keep]}
        return self._with_labels(batch, idx if keep.all() else idx[keep])

    def _with_labels(self, batch: dict[str, Any], idx: np.ndarray) -> dict[str, Any]:
        if self.has_labels:
            if self.store is not None:
                batch["label"] = self.store.gather(idx, [self.label_column])[self.label_column].astype(np.int64, copy=False)
            else:
                batch["label"] = self._labels[idx]
        return batch

    def rng(self, row: int) -> random.Random | None:
        """The generator of ``row``'s randomness in the current epoch (None without random transforms).

        Seeded with ``(seed, epoch, row)`` packed into one integer (Python's seeding of an int is
        the same on every platform and version).
        """
        if not self.options.transforms.random:
            return None
        return random.Random((self.options.seed << 96) | (self._epoch << 48) | row)

    def describe(self, row: int) -> str:
        """Which file (or store row) ``row`` is, for messages."""
        if self.images is not None:
            return self.images.name(row)
        return f"{self.store.path} row {row}"

    def finalize(self, batch: dict[str, Any]) -> dict[str, Any]:
        """On the device: GPU decode if asked, then uint8 -> dtype and Normalize, one batch op."""
        if self._gpu is not None:
            batch = self._gpu.finalize(batch)
        opts = self.options
        img = batch["image"]
        if opts.dtype == torch.uint8:
            return batch
        norm = opts.transforms.normalize
        key = (img.device, opts.dtype, opts.layout)
        if key not in self._norm_cache:
            mean = torch.tensor(norm.mean if norm else (0.0, 0.0, 0.0), dtype=torch.float32) * 255
            std = torch.tensor(norm.std if norm else (1.0, 1.0, 1.0), dtype=torch.float32) * 255
            shape = (1, 3, 1, 1) if opts.layout == "NCHW" else (1, 1, 1, 3)
            self._norm_cache[key] = (mean.view(shape).to(img.device, opts.dtype), (1 / std).view(shape).to(img.device, opts.dtype))
        mean, inv_std = self._norm_cache[key]
        batch["image"] = img.to(opts.dtype).sub_(mean).mul_(inv_std)
        return batch

    # -- reporting ------------------------------------------------------------------------
    def report(self) -> list[Skipped]:
        """The rows left out so far by ``on_error="skip"``, in row order."""
        with self._lock:
            return [self._skipped[r] for r in sorted(self._skipped)]

    def __repr__(self) -> str:
        where = self.store.path if self.store is not None else (self.images.root or f"{len(self.images)} files")
        return f"ImageSource({str(where)!r}, kind={self.kind}, rows={len(self)}, size={self.size}, layout={self.options.layout})"


__all__ = ["ImageOptions", "ImageSource", "Skipped"]
