"""Recorder files per process (forked children included); sampler sees children's CPU; batch inspection."""

import multiprocessing
import os
import time

import torch

from stoker.doctor.events import BatchDesc, Step, TensorDesc
from stoker.doctor.inspect_batch import describe, padding_share
from stoker.doctor.recorder import Recorder, read_events
from stoker.doctor.sampler import ResourceSampler


def test_events_are_written_per_process_and_a_forked_child_writes_its_own(tmp_path):
    rec = Recorder(tmp_path, interval=0.05).start()
    rec.emit((Step, 1, 0.0, 1.0))
    pid = os.fork()
    if pid == 0:  # the child: its event goes to its own file at once, even through os._exit
        rec.emit((Step, 2, 5.0, 6.0))
        os._exit(0)
    os.waitpid(pid, 0)
    rec.emit(Step(1, 1.0, 2.0))
    rec.close()
    steps = {}
    for p, ev in read_events(tmp_path):
        if isinstance(ev, Step):
            steps.setdefault(p, []).append(ev.loader)
    assert steps == {os.getpid(): [1, 1], pid: [2]}


def test_flusher_writes_while_running(tmp_path):
    rec = Recorder(tmp_path, interval=0.02).start()
    rec.emit((Step, 1, 0.0, 1.0))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(isinstance(ev, Step) for _, ev in read_events(tmp_path)):
        time.sleep(0.02)
    rec.close()
    assert any(isinstance(ev, Step) for _, ev in read_events(tmp_path))


def _burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def test_sampler_counts_child_processes_cpu():
    sampler = ResourceSampler(os.getpid(), interval=0.05).start()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_burn, args=(0.4,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    time.sleep(0.1)
    samples = sampler.stop()
    assert samples and max(s["procs"] for s in samples) >= 2
    tree = sum(s["cpu_tree"] for s in samples) * 0.05
    root = sum(s["cpu_root"] for s in samples) * 0.05
    assert tree - root > 0.3  # most of the children's 0.8 CPU-s (the last interval of each may be lost)
    assert sampler.gpu_status  # a device name, or "no GPU (...)" and sampling went on
    if "gpu" not in samples[0]:
        assert sampler.gpu_status.startswith("no GPU")


def test_padding_share_and_describe():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    assert padding_share(ids) == 1 - 3 / 8
    assert padding_share(torch.zeros(2, 4)) is None  # floats are not token ids
    d = describe({"input_ids": torch.zeros(2, 16, dtype=torch.int64), "attention_mask": torch.tensor([[1] * 4 + [0] * 12] * 2)})
    assert isinstance(d, BatchDesc) and d.type == "dict"
    assert d.padding == 0.75 and d.tensors[0] == TensorDesc("input_ids", "int64", (2, 16), "cpu")
    assert describe((torch.zeros(3, 3, 8, 8, dtype=torch.uint8), torch.arange(3))).tensors[0].dtype == "uint8"
