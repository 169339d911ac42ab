"""The doctor watches stoker loaders only through the public observer hook (``stoker.register_observer``).

These tests fail if ``stoker.Loader`` stops calling its observers (no steps, no stages in the
report), and if the doctor patches anything of stoker while it runs.
"""

import numpy as np
import torch

import stoker
from stoker.loader import Loader
from stoker.pipeline.observe import REGISTRY


class Squares(stoker.BatchSource):
    """A batch source written against the public contract: x and x**2 for the rows asked."""

    def __len__(self):
        return 60

    def read(self, chunk):
        return [{"x": idx.astype(np.int64), "y": idx.astype(np.int64) ** 2} for idx in chunk]

    def finalize(self, batch):
        return {**batch, "z": batch["x"] + batch["y"]}


class Rows(torch.utils.data.Dataset):
    """A map-style Dataset: a stoker.Loader reads it in worker processes."""

    def __len__(self):
        return 48

    def __getitem__(self, i):
        return {"x": torch.full((4,), float(i))}


def _class_attributes():
    return dict(vars(Loader))


def _loader(report, source, name=None):
    """The report's loader whose source ends with ``source``; its name is ``stoker.Loader(<name>)``: the
    store's path for a store, else the source class as users write it (not the internal StoreSource)."""
    (ld,) = [ld for ld in report.loaders if ld["info"]["source"].endswith(source)]
    assert ld["name"] == f"stoker.Loader({name or ld['info']['source']})"
    return ld


def test_the_report_names_stoker_loaders_their_stages_wait_and_settings_through_the_hook_alone(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(200, dtype=np.int64)})
    before = _class_attributes()
    with stoker.doctor(interval=0.05) as report:
        assert _class_attributes() == before  # nothing of stoker.Loader is patched while the doctor runs
        assert len(REGISTRY.current()) == 1  # the doctor's observer, registered through the public hook
        for b in Loader(tmp_path / "s", batch_size=20, num_workers=1, collate_fn=lambda b: b):
            b["x"].sum()
        for b in Loader(Squares(), batch_size=15, num_workers=0):
            assert torch.equal(b["z"], b["x"] + b["y"])
    store = _loader(report, ".StoreSource", repr(str(tmp_path / "s")))
    squares = _loader(report, ".Squares")
    assert store["steps"] == 10 and squares["steps"] == 4
    assert store["wait_s"] > 0 and squares["wait_s"] > 0  # every step's data wait is recorded
    settings = {"kind": "stoker", "engine": "threads", "num_workers": 1, "batch_size": 20, "prefetch_factor": 2}
    settings.update(pin_memory=False, device="cpu", store=True)
    assert {k: store["info"][k] for k in settings} == settings
    assert squares["info"]["store"] is False and squares["info"]["num_workers"] == 0
    assert squares["info"]["batch_size"] == 15
    stages = {r["key"]: r for r in store["stages"]}
    assert {"read", "collate", "transfer", "h2d_wait"} <= set(stages)
    assert stages["read"]["where"] == "worker threads" and stages["h2d_wait"]["where"] == "consumer"
    assert stages["h2d_wait"]["calls"] == 10
    stages = {r["key"]: r for r in squares["stages"]}
    assert {"read", "transfer", "h2d_wait", "finalize"} <= set(stages)
    assert stages["finalize"]["calls"] == 4 and stages["read"]["stage"] == f"read ({squares['info']['source']})"
    assert squares["batches"][0]["tensors"][0] == {"path": "x", "dtype": "int64", "shape": [15], "device": "cpu"}
    assert _class_attributes() == before


def test_the_observer_is_removed_when_the_doctor_ends(tmp_path):
    stoker.write(tmp_path / "s", {"x": np.arange(10)})
    with stoker.doctor(interval=0.05):
        watched = Loader(tmp_path / "s", batch_size=5)
        assert watched.observers
    assert REGISTRY.current() == []
    assert not Loader(tmp_path / "s", batch_size=5).observers


def test_worker_processes_report_their_read_and_collate_stages():
    with stoker.doctor(interval=0.05) as report:
        for b in Loader(Rows(), batch_size=8, num_workers=2):
            b["x"].sum()
    (ld,) = report.loaders
    assert ld["name"] == f"stoker.Loader({ld['info']['source']})" and ld["info"]["source"].endswith("Rows")
    assert ld["steps"] == 6
    assert ld["info"]["engine"] == "processes" and ld["info"]["num_workers"] == 2
    stages = {r["key"]: r for r in ld["stages"]}
    assert stages["read"]["calls"] >= 1 and stages["read"]["where"] == "worker processes"
    assert stages["collate"]["calls"] == stages["read"]["calls"] and stages["collate"]["where"] == "worker processes"
    assert stages["transfer"]["where"] == "consumer" and stages["h2d_wait"]["calls"] == 6
    (stats,) = report._stats.values()
    workers = {pid for pid, span in stats.spans if span.stage == "read"}
    assert workers and stats.pid not in workers  # timed in the forked workers, attributed to the parent's loader
