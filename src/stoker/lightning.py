"""``stoker.lightning.StoreDataModule``: train/val/test splits of one store as a Lightning DataModule.

    import lightning as L
    import stoker.lightning

    data = stoker.lightning.StoreDataModule("stores/digits", (0.8, 0.1, 0.1), seed=0, batch_size=256,
                                             device="cuda", num_workers=4)
    L.Trainer(max_epochs=10).fit(model, datamodule=data)

Each split is a view of the store (``store.split(sizes, seed=)``: disjoint rows that together cover
the store, drawn once from a seeded permutation); each dataloader is a :class:`stoker.Loader` over
its view, read batch-level as any store. The train loader shuffles; the val and test loaders read
their rows in storage order and never drop a row. Lightning saves the train loader's position in
checkpoints through ``state_dict``/``load_state_dict`` (refused over other splits), and moves it to
the trainer's epoch at each epoch start (so ``limit_train_batches`` does not replay one order).

Needs the ``lightning`` package (``pip install 'stoker[lightning]'``); ``import stoker`` does not.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stoker.config import LoaderConfig
from stoker.errors import ConfigError, StateError
from stoker.loader import Loader, distributed_rank
from stoker.store.reader import Store

try:
    from lightning.pytorch import LightningDataModule
except ImportError as exc:  # pragma: no cover - the lightning extra installs it
    raise ImportError("stoker.lightning needs the 'lightning' package: pip install 'stoker[lightning]'") from exc

SPLITS = ("train", "val", "test")
STATE_VERSION = 1


def _named(splits: Any) -> dict[str, Any]:
    if isinstance(splits, Mapping):
        unknown = sorted(set(splits) - set(SPLITS))
        if unknown or "train" not in splits:
            raise ConfigError(
                f"splits={dict(splits)!r}: the keys must include 'train' and be among {SPLITS}", option="splits"
            )
        return {name: splits[name] for name in SPLITS if name in splits}
    if isinstance(splits, Sequence) and not isinstance(splits, str) and len(splits) in (2, 3):
        return dict(zip(SPLITS, splits))
    raise ConfigError(
        f"splits={splits!r}: pass (train, val), (train, val, test) or a dict with 'train' and any of 'val', 'test'",
        option="splits",
    )


class _FollowEpoch:
    """Found by Lightning as ``loader.sampler``: ``set_epoch`` moves the loader to the trainer's epoch.

    Lightning calls ``set_epoch`` at every epoch start. The loader is moved only when its own epoch
    differs, so a position restored from a checkpoint in the middle of that epoch is kept.
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.loader.epoch:
            self.loader.set_epoch(epoch)


class _TrainLoader(Loader):
    """The train split's :class:`stoker.Loader`, with the epoch hook Lightning looks for."""

    @property
    def sampler(self) -> _FollowEpoch:
        return _FollowEpoch(self)


class StoreDataModule(LightningDataModule):
    """Train, val and test loaders over disjoint rows of one store.

    Args:
        store: a :class:`stoker.Store` or its path.
        splits: ``(train, val)``, ``(train, val, test)`` or a dict with ``"train"`` and any of
            ``"val"``, ``"test"``: fractions adding up to 1 or row counts adding up to ``len(store)``,
            rounded and dealt as :meth:`stoker.Store.split` does.
        seed: seeds the split and the train shuffle (epoch ``e`` uses ``(seed, e)``).
        batch_size: rows per batch, in every split.
        shuffle: the train order (``True``, ``"global"``, ``"block"``, ``False``); val and test
            are always read in storage order.
        drop_last: drop the train split's last short batch; val and test keep every row.
        rank, world_size: this process's share of each split; when None, the attached trainer's
            ``global_rank``/``world_size``, else :func:`stoker.loader.distributed_rank`.
        **loader_options: passed to every :class:`stoker.Loader` (``device``, ``num_workers``,
            ``pin_memory``, ``prefetch_factor``, ``collate_fn``, ``columns``, ``uneven``, ...).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        splits: Any = (0.8, 0.1, 0.1),
        *,
        seed: int = 0,
        batch_size: int = 1,
        shuffle: bool | str = True,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        **loader_options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(store, (Store, str, os.PathLike)):
            raise ConfigError(
                f"store must be a stoker.Store or its path, got {type(store).__name__}; "
                "for other data, build the stoker.Loader objects yourself",
                option="store",
            )
        if "batch_sampler" in loader_options:
            raise ConfigError(
                "batch_sampler: StoreDataModule decides each split's batches; pass batch_size, shuffle and drop_last",
                option="batch_sampler",
            )
        options = {k: v for k, v in loader_options.items() if k != "collate_fn"}
        self.config = LoaderConfig.from_options(
            batch_size=batch_size,
            shuffle=shuffle,
            drop_last=drop_last,
            seed=seed,
            rank=rank,
            world_size=world_size,
            **options,
        )
        self.store = store if isinstance(store, Store) else Store(store)
        self.splits = splits
        self.loader_options = loader_options
        self.views: dict[str, Store] = {}
        self._loaders: dict[str, tuple[tuple[int, int], Loader]] = {}
        self._pending: dict[str, Any] | None = None

    def setup(self, stage: str | None = None) -> None:
        """Split the store (once; every stage and every rank gets the same rows)."""
        if self.views:
            return
        named = _named(self.splits)
        try:
            views = self.store.split(list(named.values()), seed=self.config.seed)
        except ConfigError as exc:
            raise ConfigError(f"splits={self.splits!r}: {exc}", option="splits") from exc
        empty = [name for name, view in zip(named, views) if len(view) == 0]
        if empty:
            raise ConfigError(
                f"splits={self.splits!r} leaves the {empty[0]} split of {self.store!r} with no row; "
                "give it a larger share, or leave it out (a dict with only the splits you want)",
                option="splits",
            )
        self.views = dict(zip(named, views))

    def ranks(self) -> tuple[int, int]:
        """``(rank, world_size)``: the options, else the attached trainer's, else torch.distributed's."""
        cfg, trainer = self.config, self.trainer
        if trainer is not None:
            rank, world = trainer.global_rank, trainer.world_size
        else:
            rank, world = distributed_rank()
        return (rank if cfg.rank is None else cfg.rank), (world if cfg.world_size is None else cfg.world_size)

    def loader(self, split: str) -> Loader:
        """The :class:`stoker.Loader` of ``split`` for this rank, made once and kept."""
        self.setup()
        if split not in self.views:
            raise ConfigError(
                f"splits={self.splits!r} has no {split!r} split, which Lightning asked for; "
                f"name it in splits (a dict with keys among {SPLITS}, or (train, val, test))",
                option="splits",
            )
        ranks = self.ranks()
        kept = self._loaders.get(split)
        if kept is not None and kept[0] == ranks:
            return kept[1]
        train, cfg = split == "train", self.config
        options = {
            **self.loader_options,
            "batch_size": cfg.batch_size,
            "shuffle": cfg.shuffle if train else False,
            "drop_last": cfg.drop_last and train,
            "seed": cfg.seed,
            "rank": ranks[0],
            "world_size": ranks[1],
        }
        made = (_TrainLoader if train else Loader)(self.views[split], **options)
        if train and self._pending is not None:
            made.load_state_dict(self._pending)
            self._pending = None
        self._loaders[split] = (ranks, made)
        return made

    def train_dataloader(self) -> Loader:
        return self.loader("train")

    def val_dataloader(self) -> Loader:
        return self.loader("val")

    def test_dataloader(self) -> Loader:
        return self.loader("test")

    def split_digest(self) -> str:
        """A short hash of every split's rows: a saved state resumes only over the same splits."""
        self.setup()
        digest = hashlib.blake2b(digest_size=8)
        for name, view in self.views.items():
            digest.update(name.encode())
            digest.update(np.asarray(view.rows, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def state_dict(self) -> dict[str, Any]:
        """The train loader's position (its ``state_dict``) and the splits it belongs to; ``{}`` before it exists."""
        kept = self._loaders.get("train")
        train = kept[1].state_dict() if kept is not None else self._pending
        if train is None:
            return {}
        return {"version": STATE_VERSION, "splits": self.split_digest(), "train": train}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the train loader from ``state_dict`` (applied when it is made, if it is not yet).

        A state taken over other splits (another seed, other sizes, another store) is a StateError.
        """
        if state_dict == {}:
            return
        if not isinstance(state_dict, dict) or state_dict.get("version") != STATE_VERSION or "train" not in state_dict:
            raise StateError(f"not a StoreDataModule state (version {STATE_VERSION}): {state_dict!r:.200}")
        if state_dict.get("splits") != self.split_digest():
            raise StateError(
                f"cannot resume: the state was saved over other splits (digest {state_dict.get('splits')!r}, "
                f"now {self.split_digest()!r}); use the same store, splits= and seed= as the saved run"
            )
        kept = self._loaders.get("train")
        if kept is not None:
            kept[1].load_state_dict(state_dict["train"])
        else:
            self._pending = state_dict["train"]


__all__ = ["SPLITS", "StoreDataModule"]
