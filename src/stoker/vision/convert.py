"""Image files (or an ImageFolder object) to a store, in worker threads, streamed to disk.

Two modes:

* ``encoded``: an ``image`` column of JPEG bytes. Upright RGB baseline JPEGs are kept
  byte for byte (each is fully decoded once at 1/8 scale to check it); PNG, WebP, CMYK,
  EXIF-rotated images and images over ``max_side`` are re-encoded as upright RGB JPEG.
  Loading decodes them again (``ImageSource``), so random crops stay possible.
* ``resized``: an ``image`` column of uint8 ``(3, size, size)`` arrays (CHW): the shorter side
  resized to ``size``, then the center cropped. Loading is a memory copy.

Labels go to an int64 ``label`` column; class names, ``class_to_idx``, the mode, size and
the files left out go to the manifest's metadata.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.threads import default_workers, ordered_map
from stoker.store.format import Binary, Scalar, Tensor
from stoker.store.writer import DEFAULT_SHARD_SIZE, StoreWriter
from stoker.vision.decode import DEFAULT_MAX_PIXELS, decode, encode_jpeg, probe, read_file
from stoker.vision.errors import ImageError
from stoker.pipeline.threads import one_torch_thread_here
from stoker.vision.render import render_bytes, resample
from stoker.vision.source import Skipped
from stoker.vision.finder import ImageList, find_images
from stoker.vision.transforms import CenterCrop, Compose, Resize, View

MODES = ("encoded", "resized")
_MAX_REPORTED = 1000  # skipped files listed in the manifest (all are counted)


@dataclass(frozen=True)
class ConvertOptions:
    """Options of :func:`convert_images`.

    Attributes:
        mode: ``"encoded"`` (JPEG bytes) or ``"resized"`` (uint8 arrays).
        size: resized: the output side (int) or (height, width); encoded: unused.
        max_side: encoded: re-encode images whose longer side exceeds this (None keeps all sizes).
        quality: JPEG quality of re-encoded images (1-100).
        on_error: ``"raise"`` (stop at the first bad file, naming it) or ``"skip"`` (leave it out, report it).
        workers: threads (None: the usable cores).
        max_pixels: images larger than this are refused as enormous.
        shard_size: bytes per shard (int or ``"256MB"``).
        overwrite: replace an existing store.
    """

    mode: str = "encoded"
    size: int | tuple[int, int] = 256
    max_side: int | None = None
    quality: int = 90
    on_error: str = "raise"
    workers: int | None = None
    max_pixels: int = DEFAULT_MAX_PIXELS
    shard_size: int | str = DEFAULT_SHARD_SIZE
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, not {self.mode!r}", option="mode")
        if self.on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', not {self.on_error!r}", option="on_error")
        if not (isinstance(self.quality, int) and 1 <= self.quality <= 100):
            raise ConfigError(f"quality must be an integer in 1..100, not {self.quality!r}", option="quality")
        if self.max_side is not None and (not isinstance(self.max_side, int) or self.max_side < 8):
            raise ConfigError(f"max_side must be an integer >= 8 or None, not {self.max_side!r}", option="max_side")
        if self.workers is not None and (not isinstance(self.workers, int) or self.workers < 0):
            raise ConfigError(f"workers must be an integer >= 0 or None, not {self.workers!r}", option="workers")
        Resize(self.size if isinstance(self.size, int) else tuple(self.size))  # validates the size


@dataclass(frozen=True)
class ConvertReport:
    """What a conversion wrote and what it left out."""

    path: Path
    rows: int
    skipped: tuple[Skipped, ...]
    ignored: tuple[str, ...]
    seconds: float

    def __str__(self) -> str:
        text = f"{self.rows:,} images -> {self.path} in {self.seconds:.1f} s"
        if self.skipped:
            text += f"; {len(self.skipped)} skipped"
        if self.ignored:
            text += f"; {len(self.ignored)} non-image files ignored"
        return text


def _encoded_row(data: bytes, opts: ConvertOptions) -> bytes:
    info = probe(data, opts.max_pixels)
    longest = max(info.height, info.width)
    if info.jpeg and info.orientation == 1 and (opts.max_side is None or longest <= opts.max_side):
        decode(data, info, 1, 1)  # checks the whole stream (strict: truncation is an error), at 1/8 scale
        return data
    if opts.max_side is not None and longest > opts.max_side:
        scale = opts.max_side / longest
        h, w = max(1, round(info.height * scale)), max(1, round(info.width * scale))
        arr = decode(data, info, h, w)
        out = torch.empty((h, w, 3), dtype=torch.uint8)
        resample(arr, View.full(arr.shape[0], arr.shape[1]).resize(h, w), "bilinear", out, channels_first=False)
        arr = out.numpy()
    else:
        arr = decode(data, info)
    return encode_jpeg(arr, opts.quality)


class _Converter:
    """Turns a chunk of rows into a column batch; runs in worker threads."""

    def __init__(self, images: ImageList, opts: ConvertOptions) -> None:
        self.images, self.opts = images, opts
        size = opts.size if isinstance(opts.size, int) else tuple(opts.size)
        self.resize = Compose((Resize(size), CenterCrop(size)))
        self.shape = (3, *self.resize.out_size())

    def __call__(self, rows: np.ndarray) -> tuple[dict[str, Any], list[Skipped]]:
        if threading.current_thread() is not threading.main_thread():
            one_torch_thread_here()  # the threads are the parallelism; see render.py
        images: list[Any] = []
        kept: list[int] = []
        skipped: list[Skipped] = []
        out = torch.empty((len(rows), *self.shape), dtype=torch.uint8) if self.opts.mode == "resized" else None
        for row in rows.tolist():
            name = self.images.name(row)
            try:
                data = read_file(self.images.paths[row])
                if out is None:
                    images.append(_encoded_row(data, self.opts))
                else:
                    info = probe(data, self.opts.max_pixels)
                    view = self.resize.plan(info.height, info.width, None)
                    render_bytes(data, info, view, "bilinear", out[len(kept)], channels_first=True)
            except ImageError as exc:
                if self.opts.on_error == "raise":
                    raise exc.where(name) from exc
                skipped.append(Skipped(row, name, exc.reason))
                continue
            kept.append(row)
        batch: dict[str, Any] = {"image": images if out is None else out[: len(kept)].numpy()}
        if self.images.labels is not None:
            batch["label"] = np.asarray([self.images.labels[r] for r in kept], dtype=np.int64)
        return batch, skipped


def convert_images(
    src: Any,
    store: str | os.PathLike[str],
    mode: str = "encoded",
    *,
    labels: Any = None,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> ConvertReport:
    """Write the images of ``src`` as a store at ``store``; see the module docstring.

    Args:
        src: a folder (ImageFolder layout, or flat with a labels file), a list of paths, an
            :class:`~stoker.vision.finder.ImageList` or a torchvision-style ImageFolder object.
        store: the destination directory.
        mode: ``"encoded"`` or ``"resized"``.
        labels: for a flat folder or a list of paths: a CSV/JSON file, a mapping or a list.
        progress: called with the number of files done after each chunk (a progress bar's update).
        **options: the other fields of :class:`ConvertOptions` (size, max_side, quality,
            on_error, workers, max_pixels, shard_size, overwrite).
    """
    opts = ConvertOptions(mode=mode, **options)
    images = find_images(src, labels)
    if len(images) == 0:
        raise EmptyDatasetError(f"no image files found in {src!r}")
    t0 = time.perf_counter()
    convert = _Converter(images, opts)
    schema = {"image": Binary() if opts.mode == "encoded" else Tensor("uint8", convert.shape)}
    if images.labels is not None:
        schema["label"] = Scalar("int64")
    workers = default_workers() if opts.workers is None else opts.workers
    skipped: list[Skipped] = []
    metadata = {"kind": "images", "mode": opts.mode, **images.metadata()}
    if opts.mode == "resized":
        metadata.update(layout="CHW", size=list(convert.shape[1:]))
    chunks: Iterator[np.ndarray] = iter(np.array_split(np.arange(len(images)), max(1, -(-len(images) // 32))))
    writer = StoreWriter(store, schema, shard_size=opts.shard_size, overwrite=opts.overwrite, metadata=metadata)
    with writer:
        for (batch, bad), rows in _zip_sizes(ordered_map(convert, chunks, workers=workers, depth=2 * max(workers, 1), stage="convert")):
            skipped.extend(bad)
            if len(batch["image"]):
                writer.add_batch(batch)
            if progress is not None:
                progress(rows)
        if writer.rows_written == 0:
            raise EmptyDatasetError(f"every one of the {len(images)} images was skipped; nothing to write (first: {skipped[0].file}: {skipped[0].reason})")
        writer.metadata["skipped"] = [{"file": s.file, "reason": s.reason} for s in skipped[:_MAX_REPORTED]]
        writer.metadata["skipped_count"] = len(skipped)
        writer.metadata["ignored_count"] = len(images.ignored)
        rows_written = writer.rows_written
    return ConvertReport(Path(store), rows_written, tuple(skipped), images.ignored, time.perf_counter() - t0)


def _zip_sizes(results: Iterator[tuple[dict[str, Any], list[Skipped]]]) -> Iterator[tuple[tuple[dict[str, Any], list[Skipped]], int]]:
    for batch, bad in results:
        yield (batch, bad), len(batch["image"]) + len(bad)


def convert_dataset(dataset: Any, store: str | os.PathLike[str], mode: str = "encoded", **options: Any) -> ConvertReport:
    """A user's torchvision-style ImageFolder (anything with ``.samples``) to a store, in one call.

    The files are read directly; the dataset's own ``transform`` is not run (stoker's
    transforms run at load time). Class names and ``class_to_idx`` go to the metadata.
    """
    if not (hasattr(dataset, "samples") or hasattr(dataset, "imgs")):
        raise ConfigError(
            f"{type(dataset).__name__} has no .samples list of (path, label); convert its folder or its list of files instead",
            option="src",
        )
    return convert_images(dataset, store, mode, **options)


__all__ = ["ConvertOptions", "ConvertReport", "MODES", "convert_dataset", "convert_images"]
