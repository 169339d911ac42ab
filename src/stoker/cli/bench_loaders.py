"""The loader ``stoker bench`` times for a store: the one its kind of data is trained with.

``--mode auto`` reads the kind from the manifest: a store written by ``stoker convert images``
is timed through ``stoker.vision.ImageSource`` with the training transforms (RandomResizedCrop +
RandomHorizontalFlip, plus Normalize when batches go to a GPU), a store written by ``stoker
convert text`` through ``stoker.text.Loader`` (padded ``input_ids`` and ``attention_mask``),
any other store through the plain ``stoker.Loader``. ``--mode plain|images|text`` says it instead.
The kind, crop and transforms are ``stoker tune``'s own (``tune/loaders.py``), so both time the same loader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError
from stoker.store.reader import Store
from stoker.tune.loaders import TEXT_LOADER, image_crop, image_transforms, normalizes, store_kind

MODES = ("auto", "plain", "images", "text")


@dataclass(frozen=True)
class BenchLoaders:
    """What ``stoker bench`` times: ``mode``, a line saying which loader, and ``make(workers)``."""

    mode: str
    describe: str
    make: Callable[[int], Any]


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
            TEXT_LOADER,
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

    crop = image_crop(store, size)  # the crop and transforms stoker tune trains with (tune/loaders.py)
    if isinstance(crop, bool) or not isinstance(crop, int) or crop < 1:
        raise ConfigError(f"--size takes a crop side in pixels >= 1, not {crop!r}", option="size")
    normalize = normalizes(common["device"])
    transforms = image_transforms(crop, common["device"])
    steps = f"RandomResizedCrop({crop}) + RandomHorizontalFlip{' + Normalize' if normalize else ', uint8'}"
    return BenchLoaders(
        "images",
        f"stoker.vision.ImageSource ({steps})",
        lambda workers: Loader(vision.ImageSource(store, transforms), batch_size, num_workers=workers, **common),
    )
