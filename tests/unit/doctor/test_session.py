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
    assert any(r.title.startswith("Precompute") and "stoker.write(" in r.action for r in report.recommendations)


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
    assert report.verdict == "no data loader seen" and "no data loader seen" in report.message
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
