"""The online tuner's decisions in the doctor: a typed record on the wire, instant events in the trace."""

import json

import torch

import stoker
from stoker.doctor.events import Tuned, from_wire, to_wire
from stoker.pipeline import autotune, schedule
from stoker.pipeline.autotune import AutoTuner, Decision


class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((2,), float(i))


def test_a_decision_round_trips_as_a_tuned_record():
    d = Decision(12.5, 3.0, "add worker", 2, 1, 0.4, 55.0, 0.9, "the consumer waited 40%")
    record = Tuned.of(7, d)
    assert record == Tuned(7, 12.5, "add worker", 2, 1, 0.4, 55.0, 0.9, "the consumer waited 40%")
    wire = json.loads(json.dumps(to_wire(record)))
    assert wire[:4] == ["tune", 7, 12.5, "add worker"] and from_wire(wire) == record


def test_decisions_of_an_auto_loader_land_in_the_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(autotune, "WINDOW_S", 0.0)
    monkeypatch.setattr(autotune, "MIN_BATCHES", 1)
    monkeypatch.setattr(schedule, "usable_cores", lambda: 1)  # the tuner starts from the default: 1 worker

    def step(self, m):  # every window: one more worker, up to 3 (the policy is tested elsewhere)
        if self.workers < 3:
            self._set(self.workers + 1, self.prefetch)
            return self._record(m, "add worker", "scripted")
        return None

    monkeypatch.setattr(AutoTuner, "step", step)
    with stoker.doctor(tmp_path / "rep", interval=0.05):
        loader = stoker.Loader(Rows(), 4, num_workers="auto", engine="threads")
        for _ in loader:
            pass
    trace = json.loads((tmp_path / "rep" / "trace.json").read_text())["traceEvents"]
    tuned = [e for e in trace if e.get("cat") == "tune"]
    assert [e["name"] for e in tuned] == ["tune: add worker", "tune: add worker"]
    assert [e["args"]["workers"] for e in tuned] == [2, 3] and tuned[0]["ph"] == "i"
    steps_track = {(e["pid"], e["tid"]) for e in trace if e.get("name") == "data wait"}
    assert {(e["pid"], e["tid"]) for e in tuned} == steps_track  # on the loader's own track
