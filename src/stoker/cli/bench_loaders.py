"""The loader ``stoker bench`` times for a store: the one its kind of data is trained with.

``--mode auto`` reads the kind from the manifest: a store written by ``stoker convert images``
is timed through ``stoker.vision.ImageSource`` with the training transforms (RandomResizedCrop +
RandomHorizontalFlip, plus Normalize when batches go to a GPU), a store written by ``stoker
convert text`` through ``stoker.text.Loader`` (padded ``input_ids`` and ``attention_mask``),
any other store through the plain ``stoker.Loader``. ``--mode plain|images|text`` says it instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError
from stoker.store.reader import Store

MODES = ("auto", "plain", "images", "text")
DEFAULT_CROP = 224  # the training crop of an encoded image store when --size is not given


@dataclass(frozen=True)
class BenchLoaders:
    """What ``stoker bench`` times: ``mode``, a line saying which loader, and ``make(workers)``."""

    mode: str
    describe: str
    make: Callable[[int], Any]


def store_kind(store: Store) -> str:
    """``images``, ``text`` or ``plain``: what wrote the store, from its manifest's metadata."""
    from stoker.text.batches import METADATA_KEY

    if store.metadata.get("kind") == "images":
        return "images"
    if METADATA_KEY in store.metadata:
        return "text"
    return "plain"


def bench_loaders(
    store: Store,
    mode: str,
    batch_size: int,
    *,
    shuffle: bool,
    columns: tuple[str, ...] | None,
    device: str,
    size: int | None,
) -> BenchLoaders:
    """The loaders to time for ``store`` in ``mode`` (``auto``: from :func:`store_kind`)."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {mode!r}", option="mode")
    kind = store_kind(store) if mode == "auto" else mode
    if kind != "plain" and columns is not None:
        raise ConfigError(
            f"--columns selects the columns of a plain store, and this one is timed as {kind} "
            f"({'detected' if mode == 'auto' else '--mode'}), whose loader reads its own columns: "
            "drop --columns, or pass --mode plain",
            option="columns",
        )
    if kind != "images" and size is not None:
        raise ConfigError(
            f"--size {size} sets the crop of an image store, and this one is timed as {kind}: "
            "drop --size, or pass --mode images for an image store",
            option="size",
        )
    common: dict[str, Any] = {"shuffle": shuffle, "device": device}
    if kind == "images":
        return _images(store, batch_size, size, common)
    if kind == "text":
        import stoker.text

        return BenchLoaders(
            "text",
            "stoker.text.Loader (padded input_ids, attention_mask)",
            lambda workers: stoker.text.Loader(store, batch_size=batch_size, num_workers=workers, **common),
        )
    from stoker.loader import Loader

    return BenchLoaders(
        "plain",
        "stoker.Loader",
        lambda workers: Loader(store, batch_size, num_workers=workers, columns=columns, **common),
    )


def _images(store: Store, batch_size: int, size: int | None, common: dict[str, Any]) -> BenchLoaders:
    from stoker import vision
    from stoker.loader import Loader

    stored = store.metadata.get("size") if store.metadata.get("mode") == "resized" else None
    crop = size if size is not None else (min(stored) if stored else DEFAULT_CROP)
    if isinstance(crop, bool) or not isinstance(crop, int) or crop < 1:
        raise ConfigError(f"--size takes a crop side in pixels >= 1, not {crop!r}", option="size")
    normalize = common["device"] != "cpu"  # uint8 over the bus; the float cast and Normalize run on the device
    transforms = vision.train_transforms(crop, normalize=normalize)
    steps = f"RandomResizedCrop({crop}) + RandomHorizontalFlip{' + Normalize' if normalize else ', uint8'}"
    return BenchLoaders(
        "images",
        f"stoker.vision.ImageSource ({steps})",
        lambda workers: Loader(vision.ImageSource(store, transforms), batch_size, num_workers=workers, **common),
    )
