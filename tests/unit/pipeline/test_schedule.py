"""One schedule, decided in one place: the rules of pipeline/schedule.py and the loader speaking it."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import stoker
from stoker.pipeline import schedule
from stoker.pipeline.schedule import GIL_THREADS, INLINE_BYTES, Costs, Schedule, decide


def test_cgroup_quota_caps_the_usable_cores(tmp_path, monkeypatch):
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs: two cores' worth of threads, rounded up
    assert schedule._cgroup_cpus(tmp_path) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert schedule._cgroup_cpus(tmp_path) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert schedule._cgroup_cpus(v1) is None
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    assert schedule._cgroup_cpus(v1) == 0.5
    monkeypatch.setattr(schedule, "_cgroup_cpus", lambda: 0.5)
    assert schedule.usable_cores() == 1  # half a CPU still runs one thread
    monkeypatch.setattr(schedule, "_cgroup_cpus", lambda: 1000.0)
    assert schedule.usable_cores() == len(os.sched_getaffinity(0))  # a quota above the affinity changes nothing


@pytest.mark.parametrize(
    ("costs", "cores", "engine", "workers"),
    [
        (Costs(1000.0, copies=True), 16, "threads", 0),  # a small gather: inline
        (Costs(float(INLINE_BYTES), copies=True), 16, "threads", 16),  # a large one: a thread per core
        (Costs(None, copies=True), 4, "threads", 0),  # size unknown yet (streamed text): inline
        (Costs(1000.0, copies=True, fetches=True), 1, "threads", 2),  # a remote store: waits on the network
        (Costs(1000.0, holds_gil=True), 16, "processes", 16),  # user Python per row: processes
        (Costs(1000.0, holds_gil=True), 1, "threads", 1),  # ...unless nothing could run beside the consumer
        (Costs(None), 3, "threads", 3),  # nothing known: a thread per core
    ],
)
def test_default_rules(costs, cores, engine, workers):
    s = decide(costs, cores=cores)
    assert (s.engine, s.workers, s.prefetch, s.chunk) == (engine, workers, 2, None)
    assert s.set_by["engine"].startswith("default") and s.set_by["workers"].startswith("default")


def test_threads_of_gil_holding_reads_are_capped_and_given_settings_win():
    assert decide(Costs(1.0, holds_gil=True), engine="threads", cores=32).workers == GIL_THREADS
    given = decide(Costs(1.0, holds_gil=True), engine="threads", workers=12, prefetch=4, chunk=3, pin=True, cores=32)
    assert (given.engine, given.workers, given.prefetch, given.chunk, given.pin) == ("threads", 12, 4, 3, True)
    assert set(given.set_by.values()) == {"you"}
    auto = decide(Costs(1.0), workers="auto", prefetch="auto", cores=4)
    assert (auto.workers, auto.prefetch) == (4, 2)  # the tuner starts from the default, not below it
    assert auto.set_by["workers"] == auto.set_by["prefetch"] == "online tuner" and auto.set_by["chunk"] == "default"
    assert decide(Costs(1.0), cuda=True, cores=2).pin and not decide(Costs(1.0), cores=2).pin


def test_a_schedule_says_who_set_what_and_gives_its_keywords():
    s = decide(Costs(1000.0, copies=True), prefetch=3, cores=2)
    words = str(s)
    assert "0 worker(s) (default: batches under 1 MiB" in words and "prefetch 3 (you)" in words
    assert s.keywords() == {
        "engine": "threads",
        "num_workers": 0,
        "prefetch_factor": 3,
        "chunk_size": None,
        "pin_memory": False,
    }
    moved = s.with_("online tuner", workers=2)
    assert moved.workers == 2 and moved.set_by["workers"] == "online tuner" and s.workers == 0


def test_the_loader_reads_as_its_schedule_says(tmp_path, monkeypatch):
    monkeypatch.setattr(schedule, "usable_cores", lambda: 3)
    stoker.write(tmp_path / "s", {"x": np.arange(64, dtype=np.int64)})
    loader = stoker.Loader(tmp_path / "s", batch_size=8)
    assert loader.schedule.workers == loader.num_workers == 0 and loader.engine == "threads"
    big = stoker.Loader(stoker.sources.Arrays(np.zeros((64, 256, 256), np.uint8)), batch_size=32)
    assert big.schedule.workers == 3  # arrays report nothing but their size: a thread per core
    tuned = stoker.Loader(tmp_path / "s", batch_size=8, num_workers="auto", prefetch_factor="auto")
    plain = stoker.Loader(tmp_path / "s", batch_size=8)
    assert tuned.schedule.set_by["workers"] == "online tuner" and tuned.num_workers == plain.num_workers
    assert sum(len(b["x"]) for b in tuned) == 64
    assert tuned.schedule.workers == tuned.tuning.workers  # the one in force is the tuner's


def test_engine_auto_is_refused_with_what_to_do_instead():
    from stoker.errors import ConfigError

    with pytest.raises(ConfigError, match="leave engine unset.*stoker tune"):
        stoker.Loader(torch.utils.data.TensorDataset(torch.arange(8)), batch_size=4, engine="auto")


def test_executor_refuses_an_unknown_engine():
    from stoker.errors import ConfigError
    from stoker.pipeline.executor import Executor

    with pytest.raises(ConfigError, match="engine"):
        Executor(lambda chunk: chunk, Schedule("auto", 1, 1))
