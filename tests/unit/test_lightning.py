"""stoker.lightning.StoreDataModule: splits of one store, driven by a real lightning.Trainer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("lightning")  # the dev and lightning extras install it

import lightning as L  # noqa: E402

import stoker  # noqa: E402
from stoker.errors import ConfigError, StateError  # noqa: E402
from stoker.lightning import StoreDataModule  # noqa: E402

ROWS = 100


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, 4)).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.int64)
    path = tmp_path_factory.mktemp("lightning") / "store"
    stoker.write(path, {"x": x, "y": y, "row": np.arange(ROWS, dtype=np.int64)})
    return stoker.open(path)


class Recorder(L.LightningModule):
    """A linear classifier that records the store rows of every batch it trains, validates and tests on."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 2)
        self.seen: dict[str, list[list[int]]] = {"train": [], "val": [], "test": []}
        self.losses: list[float] = []

    def _step(self, batch, split):
        self.seen[split].append(batch["row"].tolist())
        loss = torch.nn.functional.cross_entropy(self.layer(batch["x"]), batch["y"])
        if split == "train":
            self.losses.append(float(loss.detach()))
        return loss

    def training_step(self, batch, batch_idx):
        return self._step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._step(batch, "test")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def trainer(**options) -> L.Trainer:
    settings = dict(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    return L.Trainer(**{**settings, **options})


def rows_of(loader) -> list[int]:
    return [r for batch in loader for r in batch["row"].tolist()]


# -- the splits --------------------------------------------------------------------------------


def sizes(data) -> dict[str, int]:
    data.setup("fit")
    return {name: len(view) for name, view in data.views.items()}


@pytest.mark.parametrize(
    "splits, expected",
    [
        ((0.8, 0.1, 0.1), {"train": 80, "val": 10, "test": 10}),
        ((0.7, 0.3), {"train": 70, "val": 30}),
        ((60, 25, 15), {"train": 60, "val": 25, "test": 15}),
        ({"train": 90, "test": 10}, {"train": 90, "test": 10}),
    ],
)
def test_splits_are_disjoint_sorted_and_cover_the_store(store, splits, expected):
    data = StoreDataModule(store, splits, seed=3)
    assert sizes(data) == expected
    rows = [data.views[name].rows for name in expected]
    assert sorted(np.concatenate(rows).tolist()) == list(range(ROWS))
    assert all((np.diff(r) > 0).all() for r in rows)


def test_splits_follow_the_seed(store):
    a, b, c = (StoreDataModule(store, (0.5, 0.5), seed=s) for s in (1, 1, 2))
    for data in (a, b, c):
        data.setup()
    assert a.views["train"].rows.tolist() == b.views["train"].rows.tolist()
    assert a.views["train"].rows.tolist() != c.views["train"].rows.tolist()


@pytest.mark.parametrize(
    "splits, words",
    [
        ((0.5, 0.4), "sum to 1"),
        ((50, 40), "sum to the 100 rows"),
        ((-10, 110), ">= 0"),
        ({"val": 1.0}, "'train'"),
        ({"train": 0.9, "valid": 0.1}, "among"),
        ((1.0,), "(train, val)"),
        ("train", "(train, val)"),
        ((100, 0), "leaves the val split"),
    ],
)
def test_bad_splits_are_refused_with_what_is_accepted(store, splits, words):
    with pytest.raises(ConfigError, match="splits") as caught:
        StoreDataModule(store, splits).setup("fit")
    assert words in str(caught.value)
    assert caught.value.option == "splits"


# -- the loaders ---------------------------------------------------------------------------------


def test_loaders_read_disjoint_splits_that_cover_the_store(store):
    data = StoreDataModule(store, (0.6, 0.2, 0.2), seed=5, batch_size=7)
    data.setup("fit")
    loaders = [data.train_dataloader(), data.val_dataloader(), data.test_dataloader()]
    assert all(isinstance(loader, stoker.Loader) for loader in loaders)
    train, val, test = (rows_of(loader) for loader in loaders)
    assert len(train) + len(val) + len(test) == ROWS
    assert sorted(train + val + test) == list(range(ROWS))
    assert sorted(train) == data.views["train"].rows.tolist()
    assert val == data.views["val"].rows.tolist()  # storage order
    assert test == data.views["test"].rows.tolist()
    assert train != sorted(train)  # shuffled


def test_drop_last_drops_only_in_train(store):
    data = StoreDataModule(store, (60, 20, 20), batch_size=7, drop_last=True)
    assert len(rows_of(data.train_dataloader())) == 56
    assert len(rows_of(data.val_dataloader())) == 20


def test_loader_options_reach_every_loader(store):
    data = StoreDataModule(store, (0.5, 0.5), batch_size=10, columns=["x", "row"], num_workers=0)
    for loader in (data.train_dataloader(), data.val_dataloader()):
        assert set(next(iter(loader))) == {"x", "row"}
        assert loader.num_workers == 0


def test_a_path_works_as_the_store(store):
    data = StoreDataModule(str(store.path), (0.5, 0.5), batch_size=50)
    assert sorted(rows_of(data.val_dataloader())) == data.views["val"].rows.tolist()


def test_a_split_not_asked_for_is_an_error_naming_it(store):
    data = StoreDataModule(store, (0.8, 0.2), batch_size=10)
    with pytest.raises(ConfigError, match="no 'test' split"):
        data.test_dataloader()


@pytest.mark.parametrize(
    "options, words",
    [
        ({"batch_sampler": object()}, "batch_sampler"),
        ({"batch_size": 0}, "batch_size"),
        ({"shuffle": "random"}, "shuffle"),
        ({"num_wrokers": 2}, "num_wrokers"),
    ],
)
def test_bad_loader_options_are_refused_up_front(store, options, words):
    with pytest.raises(ConfigError, match=words):
        StoreDataModule(store, (0.5, 0.5), **options)


def test_the_store_must_be_a_store_or_a_path():
    with pytest.raises(ConfigError, match="stoker.Store or its path"):
        StoreDataModule(np.zeros((4, 2)), (0.5, 0.5))


# -- ranks -----------------------------------------------------------------------------------------


def test_explicit_ranks_share_the_train_split(store):
    shares = []
    for rank in range(3):
        data = StoreDataModule(store, (60, 40), batch_size=4, rank=rank, world_size=3, seed=1)
        assert data.ranks() == (rank, 3)
        shares.append(rows_of(data.train_dataloader()))
    assert [len(s) for s in shares] == [20, 20, 20]
    assert sorted(sum(shares, [])) == data.views["train"].rows.tolist()


def test_without_options_or_trainer_the_rank_is_torch_distributed_s(store):
    data = StoreDataModule(store, (0.5, 0.5))
    assert data.trainer is None
    assert data.ranks() == stoker.loader.distributed_rank() == (0, 1)


def test_explicit_ranks_win_over_the_attached_trainer(store):
    data = StoreDataModule(store, (60, 40), batch_size=5, rank=1, world_size=2, seed=2)
    model = Recorder()
    trainer().fit(model, datamodule=data)
    assert data.trainer is not None and data.trainer.world_size == 1
    assert data.ranks() == (1, 2)
    expected = StoreDataModule(store, (60, 40), batch_size=5, rank=1, world_size=2, seed=2)
    assert sum(model.seen["train"], []) == rows_of(expected.train_dataloader())


def test_the_attached_trainer_gives_the_ranks(store):
    data = StoreDataModule(store, (60, 40), batch_size=5)
    model = Recorder()
    trainer().fit(model, datamodule=data)
    assert data.ranks() == (0, 1)
    assert sorted(sum(model.seen["train"], [])) == data.views["train"].rows.tolist()


# -- a real Trainer --------------------------------------------------------------------------------


def test_a_trainer_fits_validates_and_tests_through_the_datamodule(store):
    data = StoreDataModule(store, (0.6, 0.2, 0.2), batch_size=8, seed=4)
    model = Recorder()
    fit = trainer(max_epochs=3, limit_train_batches=4)
    fit.fit(model, datamodule=data)
    fit.test(model, datamodule=data)
    assert len(model.seen["train"]) == 12 and all(len(b) == 8 for b in model.seen["train"])
    assert set(sum(model.seen["train"], [])) <= set(data.views["train"].rows.tolist())
    assert sum(model.seen["val"], []) == data.views["val"].rows.tolist() * 3  # one val pass per epoch
    assert sum(model.seen["test"], []) == data.views["test"].rows.tolist()
    assert all(np.isfinite(model.losses))


def test_each_epoch_gets_a_new_order_under_limit_train_batches(store):
    """Lightning breaks off the epoch; the next one must not replay the same first batches."""
    data = StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=4)
    model = Recorder()
    trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=0).fit(model, datamodule=data)
    first, second = model.seen["train"][:2], model.seen["train"][2:]
    reference = StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=4).train_dataloader()
    reference.set_epoch(1)
    assert first != second
    assert second == [b["row"].tolist() for b, _ in zip(reference, range(2))]


# -- state -------------------------------------------------------------------------------------------


def test_state_dict_resumes_the_train_loader_in_a_new_datamodule(store):
    data = StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=6)
    loader = data.train_dataloader()
    it = iter(loader)
    head = [next(it)["row"].tolist() for _ in range(3)]
    state = data.state_dict()
    assert state["train"]["batches_done"] == 3 and state["splits"] == data.split_digest()
    tail = [b["row"].tolist() for b in it]

    again = StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=6)
    again.load_state_dict(state)  # before the loader exists, as Lightning restores it
    assert again.state_dict() == state
    assert [b["row"].tolist() for b in again.train_dataloader()] == tail
    assert len(head) + len(tail) == len(loader)


def test_a_state_from_another_split_is_refused(store):
    state = StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=6)
    state.train_dataloader()
    other = StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=7)
    with pytest.raises(StateError, match="other splits"):
        other.load_state_dict(state.state_dict())


def test_a_state_that_is_not_one_is_refused(store):
    with pytest.raises(StateError, match="StoreDataModule state"):
        StoreDataModule(store, (0.8, 0.2)).load_state_dict({"epoch": 3})
    with pytest.raises(StateError, match="StoreDataModule state"):
        StoreDataModule(store, (0.8, 0.2)).load_state_dict({"train": {}})


def test_the_state_round_trips_through_a_real_checkpoint(store, tmp_path):
    """Two epochs straight == one epoch, a checkpoint, and a new trainer resuming for the second."""
    options = dict(batch_size=8, seed=9)
    straight = Recorder()
    trainer(max_epochs=2, limit_train_batches=3, limit_val_batches=0).fit(
        straight, datamodule=StoreDataModule(store, (0.8, 0.2), **options)
    )

    data, first = StoreDataModule(store, (0.8, 0.2), **options), Recorder()
    run = trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=0)
    run.fit(first, datamodule=data)
    path = tmp_path / "epoch1.ckpt"
    run.save_checkpoint(path)
    saved = torch.load(path, weights_only=False)["StoreDataModule"]
    assert saved == data.state_dict() and saved["train"]["batches_done"] == 3

    resumed, second = StoreDataModule(store, (0.8, 0.2), **options), Recorder()
    trainer(max_epochs=2, limit_train_batches=3, limit_val_batches=0).fit(second, datamodule=resumed, ckpt_path=path)
    assert first.seen["train"] + second.seen["train"] == straight.seen["train"]
    assert resumed.state_dict()["train"]["epoch"] == 1


class Interrupted(Exception):
    pass


class SaveAndStop(L.Callback):
    """Saves a checkpoint after batch ``at`` of the first epoch, then stops the run with an error."""

    def __init__(self, path, at: int) -> None:
        self.path, self.at = path, at

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        if batch_idx == self.at:
            trainer.save_checkpoint(self.path)
            raise Interrupted


def test_a_run_stopped_mid_epoch_resumes_from_its_checkpoint_without_a_gap(store, tmp_path):
    settings = dict(max_epochs=2, limit_val_batches=0)
    straight = Recorder()
    trainer(**settings).fit(straight, datamodule=StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=1))

    first, path = Recorder(), tmp_path / "mid.ckpt"
    with pytest.raises(Interrupted):
        trainer(**settings, callbacks=[SaveAndStop(path, at=3)]).fit(
            first, datamodule=StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=1)
        )
    assert torch.load(path, weights_only=False)["StoreDataModule"]["train"]["batches_done"] == 4
    second = Recorder()
    trainer(**settings).fit(second, datamodule=StoreDataModule(store, (0.8, 0.2), batch_size=8, seed=1), ckpt_path=path)
    assert len(first.seen["train"]) == 4
    assert first.seen["train"] + second.seen["train"] == straight.seen["train"]


def test_the_lazy_attribute_is_the_module():
    import stoker.lightning

    assert stoker.lightning.StoreDataModule is StoreDataModule
    assert "lightning" in stoker.__all__
