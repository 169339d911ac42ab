"""stoker.doctor() in-process: verdicts on real loops, stage timings, profiler labels, torch patches undone."""

import time

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import stoker
from stoker.loader import Loader


class SlowDataset(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        time.sleep(0.005)  # 40 rows: at least 0.2 s of data wait against a loop body of microseconds
        return torch.full((4,), float(i))


def test_slow_dataset_is_input_bound_and_names_its_getitem():
    with stoker.doctor(interval=0.05) as report:
        for batch in DataLoader(SlowDataset(), batch_size=8):
            batch.sum()
    assert report.verdict == "input-bound" and report.stall_share > 0.5
    assert report.bottleneck_stage.endswith("SlowDataset.__getitem__")
    (ld,) = report.loaders
    assert ld["steps"] == 5 and ld["info"]["num_workers"] == 0
    getitem = ld["stages"][0]  # counted per sample (40), not per batch (5)
    assert getitem["calls"] == 40 and getitem["unit"] == "sample" and ld["random"] is False
    (pre,) = [r for r in report.recommendations if r.title.startswith("Precompute")]
    # the exact command: the Dataset's class takes no argument, so `stoker convert dataset module:Class` fits
    assert f"stoker convert dataset {SlowDataset.__module__}:SlowDataset stores/slowdataset" in pre.action
    assert 'stoker.Loader("stores/slowdataset", batch_size=8, shuffle=True)' in pre.action
    assert "per sample (40 calls)" in pre.evidence


def test_a_loop_busy_between_fetches_is_compute_bound():
    """The doctor calls the time between fetches compute. The loop spends at least 50 ms a step
    there (a matmul loop, then a sleep: a load on the machine cannot shorten it) against fetches
    of eight rows of a TensorDataset, so a loaded machine cannot turn the verdict."""
    data = TensorDataset(torch.randn(64, 256))
    w = torch.randn(256, 256)
    with stoker.doctor(interval=0.05) as report:
        for (x,) in DataLoader(data, batch_size=8):
            y = x
            for _ in range(10):
                y = torch.tanh(y @ w)
            time.sleep(0.05)
    assert report.verdict == "compute-bound", report.message
    assert report.stall_share < 0.2 and report.bottleneck_stage is None
    assert not any("num_workers" in r.action for r in report.recommendations)


def test_stoker_loader_stages_are_timed_and_the_slow_one_named(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(400, dtype=np.int64)})

    def slow_collate(batch):
        time.sleep(0.05)  # 8 batches: 0.4 s in collate against reads of 50 rows of a store
        return batch

    with stoker.doctor(interval=0.05) as report:
        for b in Loader(tmp_path / "s", batch_size=50, num_workers=1, collate_fn=slow_collate):
            b["x"].sum()
    assert report.verdict == "input-bound"
    (ld,) = report.loaders
    keys = {r.get("key") for r in ld["stages"]}
    assert {"read", "collate", "transfer", "h2d_wait"} <= keys
    assert ld["stages"][0]["key"] == "collate" and report.bottleneck_stage == "collate"
    assert ld["steps"] == 8


def test_torch_patches_are_undone_after_exit():
    from torch.utils.data import dataloader
    from torch.utils.data._utils import fetch

    def patched():
        base = dataloader._BaseDataLoaderIter
        return (base.__next__, base.__init__, fetch._MapDatasetFetcher.fetch, fetch._IterableDatasetFetcher.fetch)

    before = patched()
    with stoker.doctor(interval=0.05):
        assert all(p is not b for p, b in zip(patched(), before))
    assert patched() == before


def test_an_exception_in_the_block_still_fills_the_report():
    with pytest.raises(KeyError):
        with stoker.doctor(interval=0.05) as report:
            for i, _ in enumerate(DataLoader(TensorDataset(torch.zeros(30, 2)), batch_size=5)):
                if i == 2:
                    raise KeyError("boom")
    assert report.loaders and report.loaders[0]["steps"] == 3


def test_no_loader_says_so():
    with stoker.doctor(interval=0.05) as report:
        torch.randn(100, 100) @ torch.randn(100, 100)
    assert report.verdict == "no data loader seen" and "never fetched a batch" in report.message
    assert report.recommendations == []


def test_stages_carry_record_function_labels_while_profiling(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(100)})
    with stoker.doctor(interval=0.05):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in Loader(tmp_path / "s", batch_size=10, num_workers=0):
                pass
    names = {e.key for e in prof.key_averages()}
    assert {"stoker.read", "stoker.transfer", "stoker.h2d_wait"} <= names


def test_outputs_written_under_out(tmp_path):
    import json

    with stoker.doctor(tmp_path / "rep", interval=0.05) as report:
        for _ in DataLoader(TensorDataset(torch.zeros(20, 2)), batch_size=5):
            pass
    saved = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert saved["verdict"] == report.verdict and len(saved["steps"]) == 4
    trace = json.loads((tmp_path / "rep" / "trace.json").read_text())
    assert sum(e.get("name") == "data wait" for e in trace["traceEvents"]) == 4
    assert "<svg" in (tmp_path / "rep" / "report.html").read_text()


def test_bad_options_say_what_to_do():
    with pytest.raises(ValueError, match="interval"):
        stoker.doctor(interval=0)
    with pytest.raises(ValueError, match="stall_threshold"):
        stoker.doctor(stall_threshold=1.5)


class RandomCrops(Dataset):
    """A slow __getitem__ that draws a random crop per call, as a training set with augmentation does."""

    def __init__(self):
        self.image = torch.arange(256.0).reshape(16, 16)

    def __len__(self):
        return 32

    def __getitem__(self, i):
        time.sleep(0.005)  # 32 rows: at least 0.16 s of data wait against a loop body of microseconds
        y, x = torch.randint(0, 9, (2,)).tolist()
        return self.image[y : y + 8, x : x + 8]


def _draws_after_an_epoch(under_doctor):
    torch.manual_seed(0)
    ds = RandomCrops()
    if under_doctor:
        with stoker.doctor(interval=0.05) as report:
            crops = [b.clone() for b in DataLoader(ds, batch_size=8)]
    else:
        report, crops = None, [b.clone() for b in DataLoader(ds, batch_size=8)]
    return report, crops, torch.rand(3)


def test_random_crops_are_not_told_to_be_frozen_into_a_store_and_the_script_draws_the_same():
    report, crops, after = _draws_after_an_epoch(under_doctor=True)
    _, plain_crops, plain_after = _draws_after_an_epoch(under_doctor=False)
    # the probe's two extra __getitem__ calls restore the generators: same crops, same later draws
    assert all(torch.equal(a, b) for a, b in zip(crops, plain_crops)) and torch.equal(after, plain_after)
    assert not any(r.title.startswith("Precompute") for r in report.recommendations)
    assert report.verdict == "input-bound" and report.loaders[0]["random"] is True
    (aug,) = [r for r in report.recommendations if "augment" in r.title]
    assert "would freeze the augmentation" in aug.evidence


def test_two_loaders_over_one_dataset_class_are_named_by_their_variables():
    with stoker.doctor(interval=0.05) as report:
        train_loader = DataLoader(SlowDataset(), batch_size=8)
        val_loader = DataLoader(SlowDataset(), batch_size=20)
        for _ in train_loader:
            pass
        for _ in val_loader:
            pass
    cls = f"{SlowDataset.__module__}.SlowDataset"
    assert sorted(ld["name"] for ld in report.loaders) == [
        f"train_loader = DataLoader({cls})",
        f"val_loader = DataLoader({cls})",
    ]
    names = {ld["name"]: ld["batch_size"] for ld in report.loaders}
    assert names == {f"train_loader = DataLoader({cls})": 8, f"val_loader = DataLoader({cls})": 20}
    assert {r.loader for r in report.recommendations} <= set(names)
