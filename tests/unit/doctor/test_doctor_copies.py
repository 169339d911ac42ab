"""Copies that do not overlap compute and device syncs (CUDA), judged from recorded events.

The events are what ``copies.py`` records on a CUDA host (one ``DeviceStep`` per step watched);
here they are written to the events directory as a run writes them and read back through the
report. ``CopyWatch`` itself is checked where this host allows: without CUDA it records nothing
and leaves torch untouched, and its wrappers, installed and removed, give back torch as it was.
The end-to-end run on a GPU is ``tests/e2e/test_doctor_stall_classes.py::test_copies_and_syncs_on_cuda``.
"""

import threading

import torch

from stoker.doctor.config import DoctorConfig
from stoker.doctor.copies import SYNCS, CopyWatch, _non_blocking
from stoker.doctor.events import DeviceStep, LoaderDesc, LoaderSeen, Meta, Step, encode_line
from stoker.doctor.report import build_report

MIB = 2**20


def _desc(pin_memory):
    return LoaderDesc(kind="torch", name="DataLoader(Toy)", source="Toy", num_workers=2, pin_memory=pin_memory)


def _report(tmp_path, steps, pin_memory=False):
    """A run of ``len(steps)`` batches, ``steps[i]`` the keywords of the i-th step's ``DeviceStep``."""
    events = [Meta(pid=100, ppid=1), LoaderSeen(1, _desc(pin_memory))]
    for i, kw in enumerate(steps):
        t = 1.0 + 0.01 * i
        events.append(Step(1, t, t + 0.001))
        fields = dict(h2d=0, blocking=0, pageable=0, nbytes=0, copy_s=0.0, syncs=0, sync_s=0.0, ops=())
        events.append(DeviceStep(1, t + 0.001, t + 0.01, **{**fields, **kw}))
    (tmp_path / "events-100.jsonl").write_text(encode_line(events))
    report = build_report(tmp_path, [], "NVIDIA H100", DoctorConfig(interval=0.1), wall=(0.0, 5.0))
    return {s.kind: s for s in report.stalls}


PAGEABLE = dict(h2d=2, blocking=2, pageable=2, nbytes=2 * MIB, copy_s=0.002)  # x.to(device), y.to(device)
OVERLAPPED = dict(h2d=2, blocking=0, pageable=0, nbytes=2 * MIB, copy_s=0.0001)  # pinned, non_blocking=True
ITEM = dict(syncs=1, sync_s=0.004, ops=(".item()",))


def test_blocking_copies_from_pageable_memory_are_named_with_their_numbers(tmp_path):
    stalls = _report(tmp_path, [PAGEABLE] * 20)
    assert set(stalls) == {"copies"}
    copies = stalls["copies"]
    assert "in 20 of 20 steps watched" in copies.verdict
    assert "40 of 40 without non_blocking=True" in copies.verdict
    assert "40 of 40 from pageable memory (pin_memory=False)" in copies.verdict
    assert "2.0 copies and 2.00 MiB per step, 2.00 ms per step in the copy calls, 1.0 GB/s, 22 % of the step" in (
        copies.verdict
    )
    assert "DataLoader(..., pin_memory=True)" in copies.torch_fix and "non_blocking=True" in copies.torch_fix
    assert 'device="cuda"' in copies.stoker_fix and "side CUDA stream" in copies.stoker_fix


def test_blocking_copies_from_pinned_batches_ask_only_for_non_blocking(tmp_path):
    pinned = dict(PAGEABLE, pageable=0)
    copies = _report(tmp_path, [pinned] * 20, pin_memory=True)["copies"]
    assert "40 of 40 without non_blocking=True" in copies.verdict and "pageable" not in copies.verdict
    assert copies.torch_fix.startswith(
        "the batches are pinned already; in the loop x = x.to(device, non_blocking=True)"
    )


def test_an_item_every_step_is_named_as_a_device_sync(tmp_path):
    stalls = _report(tmp_path, [dict(OVERLAPPED, **ITEM)] * 20)
    assert set(stalls) == {"syncs"}
    sync = stalls["syncs"]
    assert "20 of 20 steps watched call .item() on a CUDA tensor (1.0 per step, 4.00 ms per step" in sync.verdict
    assert "if step % 100 == 0" in sync.torch_fix and "Event" not in sync.torch_fix
    timed = _report(tmp_path, [dict(syncs=1, sync_s=0.004, ops=("torch.cuda.synchronize()",))] * 20)["syncs"]
    assert "torch.cuda.Event(enable_timing=True)" in timed.torch_fix


def test_overlapped_copies_and_an_item_every_50_steps_name_nothing(tmp_path):
    steps = [dict(OVERLAPPED, **ITEM) if i % 50 == 0 else OVERLAPPED for i in range(200)]
    assert not _report(tmp_path, steps)


def test_a_fault_in_fewer_than_half_the_steps_or_too_few_steps_names_nothing(tmp_path):
    assert not _report(tmp_path, [PAGEABLE if i % 3 == 0 else OVERLAPPED for i in range(30)])  # a third of the steps
    assert not _report(tmp_path, [dict(PAGEABLE, **ITEM)] * 5)  # 5 steps watched: too few to judge


def _torch_as_is():
    return {n: torch.Tensor.__dict__.get(n) for n in ("to", "cuda", *SYNCS)}, torch.cuda.synchronize


def test_without_cuda_the_watch_records_nothing_and_leaves_torch_alone():
    before = _torch_as_is()
    events = []
    watch = CopyWatch(events.append)
    watch.step(1, 0.0, 0.1)
    watch.step(1, 0.2, 0.3)
    if not torch.cuda.is_available():
        assert watch.state == "done" and not events and _torch_as_is() == before
    watch.uninstall()
    assert _torch_as_is() == before


def test_the_wrappers_are_transparent_count_no_cpu_tensor_and_come_off():
    before = _torch_as_is()
    events = []
    watch = CopyWatch(events.append, steps=2)
    watch._install()  # what the first batch does on a CUDA host
    try:
        assert torch.Tensor.__dict__.get("to") is not None and torch.cuda.synchronize is not before[1]
        x = torch.arange(6.0).reshape(2, 3)
        assert x.to(torch.float64).dtype == torch.float64 and x.to("cpu", non_blocking=True) is x
        assert x.sum().item() == 15.0 and float(x[0, 1]) == 1.0 and int(x[1, 2]) == 5
        assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and x.cpu() is x
        watch.step(1, 1.0, 1.1)
        assert events == [(DeviceStep, 1, 0.0, 1.0, 0, 0, 0, 0, 0.0, 0, 0.0, ())]
        watch.step(1, 1.2, 1.3)  # the last step watched: the originals are back
        assert watch.state == "done" and len(events) == 2
    finally:
        watch.uninstall()
    assert _torch_as_is() == before


def test_non_blocking_copies_from_pageable_memory_ask_for_pinned_batches(tmp_path):
    # non_blocking=True from pageable memory is still a synchronous copy: the fix is pin_memory=True
    copies = _report(tmp_path, [dict(PAGEABLE, blocking=0)] * 20)["copies"]
    assert "40 of 40 from pageable memory (pin_memory=False)" in copies.verdict
    assert "without non_blocking" not in copies.verdict
    assert copies.torch_fix.startswith("DataLoader(..., pin_memory=True) and ")


def test_syncs_of_several_kinds_are_named_together(tmp_path):
    mixed = dict(OVERLAPPED, syncs=3, sync_s=0.006, ops=(".cpu()", ".tolist()", "to('cpu')"))
    sync = _report(tmp_path, [mixed] * 12 + [OVERLAPPED] * 8)["syncs"]
    assert "12 of 20 steps watched call .cpu(), .tolist(), to('cpu') on a CUDA tensor (3.0 per step, 6.00 ms" in (
        sync.verdict
    )


class Recorded:
    """A tensor as the watch's wrappers see one in a recorded call: its device, whether pinned, its bytes."""

    def __init__(self, device, pinned=False, nbytes=0):
        self.device = type("Device", (), {"type": device})()
        self.is_cuda, self.nbytes, self._pinned = device == "cuda", nbytes, pinned

    def is_pinned(self):
        return self._pinned


def _moved(t, device, *args, **kwargs):
    """``Tensor.to(device, ...)`` as it returns: a tensor on ``device``."""
    return Recorded(device, nbytes=t.nbytes)


def test_the_wrappers_count_a_steps_copies_and_syncs_and_the_report_names_them(tmp_path):
    """The counting of ``copies.py``'s wrappers, fed the calls a loop makes on a CUDA host (here without one):
    each step copies a pageable batch without non_blocking, one pinned with it, reads a loss with .item() and
    moves a CPU tensor (not counted). The ``DeviceStep`` events it emits, read by the report, name both stalls."""
    events = []
    watch = CopyWatch(events.append)
    watch.state = "watching"  # what the first batch does where torch sees a CUDA device
    copy, item = watch._copy(_moved), watch._sync(lambda t: 0.5, "item")
    as_float = watch._sync(lambda t: 0.5, "__float__")
    for i in range(20):
        copy(Recorded("cpu", nbytes=MIB), "cuda")
        copy(Recorded("cpu", pinned=True, nbytes=MIB), "cuda", non_blocking=True)
        copy(Recorded("cpu", nbytes=MIB), "cpu")  # host to host: no copy to the device
        item(Recorded("cuda"))
        as_float(Recorded("cpu"))  # float() of a CPU tensor waits for nothing
        watch.step(1, 1.0 + 0.01 * i, 1.001 + 0.01 * i)
    assert len(events) == 20
    first = DeviceStep(*events[0][1:])
    assert (first.h2d, first.blocking, first.pageable, first.nbytes, first.syncs) == (2, 1, 1, 2 * MIB, 1)
    assert first.ops == (".item()",)
    run = [Meta(pid=100, ppid=1), LoaderSeen(1, _desc(False))]
    run += [Step(1, 1.0 + 0.01 * i, 1.001 + 0.01 * i) for i in range(20)] + events
    (tmp_path / "events-100.jsonl").write_text(encode_line(run))
    report = build_report(tmp_path, [], "NVIDIA H100", DoctorConfig(interval=0.1), wall=(0.0, 5.0))
    stalls = {s.kind: s for s in report.stalls}
    assert set(stalls) == {"copies", "syncs"}
    assert "20 of 40 without non_blocking=True; 20 of 40 from pageable memory" in stalls["copies"].verdict


def test_the_wrappers_count_only_the_loops_thread_and_a_device_to_host_copy_as_a_sync():
    watch = CopyWatch(lambda e: None)
    copy = watch._copy(_moved)
    worker = threading.Thread(target=copy, args=(Recorded("cpu", nbytes=MIB), "cuda"))
    worker.start()
    worker.join()
    assert watch.h2d == 0  # a copy made by another thread (a loader's own) is not the loop's
    copy(Recorded("cuda"), "cpu")
    copy(Recorded("cuda"), "cpu", non_blocking=True)  # queued: no wait
    assert (watch.h2d, watch.syncs, watch.ops) == (0, 1, {"to('cpu')"})


def test_non_blocking_is_read_as_torch_reads_it():
    # Tensor.to(device, dtype, non_blocking, copy), .to(other, non_blocking, copy), .cuda(device, non_blocking)
    assert _non_blocking(("cuda", torch.float16, True), {})
    assert _non_blocking((0, True), {}) and _non_blocking(("cuda",), {"non_blocking": True})
    assert not _non_blocking(("cuda", torch.float16, False, True), {})  # copy=True, non_blocking=False
    assert not _non_blocking(("cuda",), {"copy": True})
