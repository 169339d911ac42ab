"""Image files (or an ImageFolder object) to a store (``stoker.convert.images``) in worker threads, streamed.

Two modes:

* ``encoded``: an ``image`` column of JPEG bytes. Upright RGB baseline JPEGs are kept
  byte for byte (each is fully decoded once at 1/8 scale to check it); PNG, WebP, CMYK,
  EXIF-rotated images and images over ``max_side`` are re-encoded as upright RGB JPEG.
  Loading decodes them again (``ImageSource``), so random crops stay possible.
* ``resized``: an ``image`` column of uint8 ``(3, size, size)`` arrays (CHW): the shorter side
  resized to ``size``, then the center cropped. Loading is a memory copy.

Labels go to an int64 ``label`` column and each image's source file to a ``path`` string column
(relative to the source root when it is under it, as ImageFolder's ``samples`` name files; the
root is in the metadata), so a row traces back to its file (``ImageSource.describe``/``samples``);
loaders read it only when asked. Class names, ``class_to_idx``, the mode, size and the files
left out go to the manifest's metadata.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from stoker.convert.inputs import is_url, staged
from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.schedule import usable_cores
from stoker.pipeline.threads import one_torch_thread_here, ordered_map
from stoker.store.format import Binary, Scalar, String, Tensor
from stoker.vision.compose import Compose
from stoker.vision.decode import DEFAULT_MAX_PIXELS, decode, encode_jpeg, probe, read_file
from stoker.vision.errors import ImageError
from stoker.vision.finder import ImageList, find_images
from stoker.vision.readers import Skipped
from stoker.vision.render import render_bytes, resample
from stoker.vision.source import PATH_COLUMN
from stoker.vision.transforms import CenterCrop, Resize, View

MODES = ("encoded", "resized")
_MAX_REPORTED = 1000  # skipped files listed in the manifest (all are counted)


@dataclass(frozen=True)
class ImageStoreOptions:
    """How each image is written (the options of ``stoker.convert.images`` that only images have).

    Attributes:
        mode: ``"encoded"`` (JPEG bytes) or ``"resized"`` (uint8 arrays).
        size: resized: the output side (int) or (height, width); encoded: unused.
        max_side: encoded: re-encode images whose longer side exceeds this (None keeps all sizes).
        quality: JPEG quality of re-encoded images (1-100).
        on_error: ``"raise"`` (stop at the first bad file, naming it) or ``"skip"`` (leave it out, report it).
        max_pixels: images larger than this are refused as enormous (None: ``DEFAULT_MAX_PIXELS``).
    """

    mode: str = "encoded"
    size: int | tuple[int, int] = 256
    max_side: int | None = None
    quality: int = 90
    on_error: str = "raise"
    max_pixels: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {MODES}, not {self.mode!r}", option="mode")
        if self.on_error not in ("raise", "skip"):
            raise ConfigError(f"on_error must be 'raise' or 'skip', not {self.on_error!r}", option="on_error")
        if not (isinstance(self.quality, int) and 1 <= self.quality <= 100):
            raise ConfigError(f"quality must be an integer in 1..100, not {self.quality!r}", option="quality")
        if self.max_side is not None and (not isinstance(self.max_side, int) or self.max_side < 8):
            raise ConfigError(f"max_side must be an integer >= 8 or None, not {self.max_side!r}", option="max_side")
        pixels = self.max_pixels
        if pixels is not None and (isinstance(pixels, bool) or not isinstance(pixels, int) or pixels < 1):
            raise ConfigError(f"max_pixels must be a positive integer or None, not {pixels!r}", option="max_pixels")
        Resize(self.side)  # validates the size

    @property
    def side(self) -> int | tuple[int, int]:
        """``size`` as an int or a (height, width) pair."""
        return self.size if isinstance(self.size, int) else (int(self.size[0]), int(self.size[1]))

    @property
    def pixel_limit(self) -> int:
        """``max_pixels``, or the decoder's default when it is None."""
        return DEFAULT_MAX_PIXELS if self.max_pixels is None else self.max_pixels


def _encoded_row(data: bytes, opts: ImageStoreOptions) -> bytes:
    info = probe(data, opts.pixel_limit)
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

    def __init__(self, images: ImageList, opts: ImageStoreOptions) -> None:
        self.images, self.opts = images, opts
        self.resize = Compose((Resize(opts.side), CenterCrop(opts.side)))
        self.shape = (3, *CenterCrop(opts.side).out_size(None))  # the size every row comes out at

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
                    info = probe(data, self.opts.pixel_limit)
                    view = self.resize.plan(info.height, info.width, None)
                    render_bytes(data, info, view, "bilinear", out[len(kept)], channels_first=True)
            except ImageError as exc:
                if self.opts.on_error == "raise":
                    raise exc.where(name) from exc
                skipped.append(Skipped(row, name, exc.reason))
                continue
            kept.append(row)
        batch: dict[str, Any] = {"image": images if out is None else out[: len(kept)].numpy()}
        batch[PATH_COLUMN] = [self.images.name(r) for r in kept]
        if self.images.labels is not None:
            batch["label"] = np.asarray([self.images.labels[r] for r in kept], dtype=np.int64)
        return batch, skipped


def convert(
    src: Any,
    store: str | os.PathLike[str],
    labels: Any,
    opts: ImageStoreOptions,
    options: ConvertOptions,
    names: Sequence[str] | None = None,
) -> ConvertResult:
    """Write the images of ``src`` as a store at ``store``; see the module docstring.

    Args:
        src: a folder (ImageFolder layout, or flat with a labels file), a list of paths, an
            :class:`~stoker.vision.finder.ImageList` or a torchvision-style ImageFolder object
            (its ``samples`` are read directly; its ``transform`` is not run).
        store: the destination directory.
        labels: for a flat folder or a list of paths: a CSV/JSON file, a mapping or a list.
        opts: how each image is written.
        options: the shared options; ``workers``: threads (None: the usable cores; 0: this
            thread); ``progress`` counts files done (written or skipped).
        names: the class names in id order to number labels by (None: the found classes, sorted).
    """
    if is_url(src):  # objects under a prefix: downloaded into a local folder of the same layout
        with staged(src, store, options, images=True) as (local, writer_options):
            return convert(local, store, labels, opts, writer_options, names)
    images = find_images(src, labels, names=names)
    if len(images) == 0:
        raise EmptyDatasetError(f"no image files found in {src!r}")
    convert_chunk = _Converter(images, opts)
    schema = {"image": Binary() if opts.mode == "encoded" else Tensor("uint8", convert_chunk.shape)}
    if images.labels is not None:
        schema["label"] = Scalar("int64")
    schema[PATH_COLUMN] = String()
    workers = usable_cores() if options.workers is None else options.workers
    skipped: list[Skipped] = []
    metadata = {"kind": "images", "mode": opts.mode, **images.metadata()}
    if opts.mode == "resized":
        metadata.update(layout="CHW", size=list(convert_chunk.shape[1:]))
    chunks: Iterator[np.ndarray] = iter(np.array_split(np.arange(len(images)), max(1, -(-len(images) // 32))))
    writer = options.writer(store, schema, metadata)
    with writer, options.bar(len(images), "images", unit="img") as bar:
        results = cast(
            Generator[tuple[dict[str, Any], list[Skipped]], None, None],
            ordered_map(convert_chunk, chunks, workers=workers, depth=2 * max(workers, 1), stage="convert"),
        )
        try:
            for batch, bad in results:
                skipped.extend(bad)
                if len(batch["image"]):
                    writer.add_batch(batch)
                bar.update(len(batch["image"]) + len(bad))  # files done: written or skipped
        finally:
            results.close()
        if writer.rows_written == 0:
            first = skipped[0]
            raise EmptyDatasetError(
                f"every one of the {len(images)} images was skipped; nothing to write "
                f"(first: {first.file}: {first.reason})"
            )
        writer.metadata["skipped"] = [{"file": s.file, "reason": s.reason} for s in skipped[:_MAX_REPORTED]]
        writer.metadata["skipped_count"] = len(skipped)
        writer.metadata["ignored_count"] = len(images.ignored)
        rows = writer.rows_written
    report = {"skipped": tuple(skipped), "ignored": tuple(images.ignored), "classes": tuple(images.classes or ())}
    return ConvertResult(Path(store), rows, len(skipped), report=report)
