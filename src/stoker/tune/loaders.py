"""The loader a store is trained with, built with any tune setting, and the call that builds it.

The choice is made from the store's manifest: a store written by ``stoker convert images`` is read
through ``stoker.vision.ImageSource`` with the training transforms (RandomResizedCrop +
RandomHorizontalFlip, uint8 on the CPU, Normalize on a GPU), one written by ``stoker convert text``
through ``stoker.text.Loader``, any other through ``stoker.Loader``. Batches are shuffled, as in
training, with a fixed ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError
from stoker.store.reader import Store
from stoker.tune.space import IMAGE_ONLY

DEFAULT_CROP = 224  # the training crop of an encoded image store


def store_kind(store: Store) -> str:
    """``images``, ``text`` or ``plain``: what wrote the store, from its manifest's metadata."""
    from stoker.text.batches import METADATA_KEY

    if store.metadata.get("kind") == "images":
        return "images"
    if METADATA_KEY in store.metadata:
        return "text"
    return "plain"


@dataclass(frozen=True)
class LoaderPlan:
    """How to build the loader of ``store`` for a tune setting, and to write that call out."""

    store: Store
    kind: str
    batch_size: int
    device: str = "cpu"
    seed: int = 0

    def options(self, setting: dict[str, Any]) -> dict[str, Any]:
        """The loader keywords of ``setting``: shuffled, seeded, on ``device`` (an image source's
        own options, ``reduced_decode`` and ``decode_device``, go to the source instead)."""
        loader = {k: v for k, v in setting.items() if k not in IMAGE_ONLY}
        return {"shuffle": True, "seed": self.seed, "device": self.device, **loader}

    @staticmethod
    def source_options(setting: dict[str, Any]) -> dict[str, Any]:
        """The ``ImageSource`` options of ``setting``."""
        return {k: v for k, v in setting.items() if k in IMAGE_ONLY}

    def make(self, setting: dict[str, Any]) -> Any:
        """The loader with ``setting``'s keywords (a dict of loader keywords, maybe empty: the defaults)."""
        import stoker

        opts = self.options(setting)
        if self.kind == "text":
            import stoker.text

            return stoker.text.Loader(self.store, batch_size=self.batch_size, **opts)
        if self.kind == "images":
            from stoker import vision

            transforms = vision.train_transforms(self.crop, normalize=self.normalize)
            source = vision.ImageSource(self.store, transforms, **self.source_options(setting))
            return stoker.Loader(source, self.batch_size, **opts)
        return stoker.Loader(self.store, self.batch_size, **opts)

    @property
    def normalize(self) -> bool:
        """Whether the training transforms end with Normalize: uint8 over the bus, and on a GPU the
        float cast and Normalize run on the device."""
        return self.device != "cpu"

    @property
    def crop(self) -> int:
        """The training crop of an image store: the smaller side of a resized store's images, else
        :data:`DEFAULT_CROP`."""
        stored = self.store.metadata.get("size") if self.store.metadata.get("mode") == "resized" else None
        return min(stored) if stored else DEFAULT_CROP

    def call(self, setting: dict[str, Any]) -> str:
        """The exact Python call that builds this loader with ``setting``, to paste into a script."""
        store = f"stoker.open({str(self.store.path)!r})"
        kw = ", ".join(f"{k}={v!r}" for k, v in self.options(setting).items())
        if self.kind == "text":
            return f"stoker.text.Loader({store}, batch_size={self.batch_size}, {kw})"
        if self.kind == "images":
            transforms = f"stoker.vision.train_transforms({self.crop}, normalize={self.normalize})"
            own = "".join(f", {k}={v!r}" for k, v in self.source_options(setting).items())
            return (
                f"stoker.Loader(stoker.vision.ImageSource({store}, {transforms}{own}), "
                f"batch_size={self.batch_size}, {kw})"
            )
        return f"stoker.Loader({store}, batch_size={self.batch_size}, {kw})"

    def describe(self) -> str:
        """One line saying which loader this is."""
        if self.kind == "images":
            return f"stoker.vision.ImageSource (RandomResizedCrop({self.crop}) + RandomHorizontalFlip)"
        if self.kind == "text":
            return "stoker.text.Loader (padded input_ids, attention_mask)"
        return "stoker.Loader"


def plan_for(
    store: Store | str, batch_size: int, *, device: str = "cpu", seed: int = 0, kind: str | None = None
) -> LoaderPlan:
    """The :class:`LoaderPlan` of ``store`` (a :class:`stoker.Store` or its path)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}", option="batch_size")
    ds = store if isinstance(store, Store) else Store(store)
    found = store_kind(ds) if kind is None else kind
    if found not in ("plain", "images", "text"):
        raise ConfigError(f"kind must be plain, images or text, not {found!r}", option="kind")
    return LoaderPlan(ds, found, batch_size, device, seed)
