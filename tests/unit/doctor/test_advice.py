"""Verdict and recommendations from synthetic events: each rule fires on its evidence and only then."""

import pytest

from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import BatchDesc, BatchSeen, LoaderDesc, LoaderSeen, StageSpan, Step, TensorDesc, encode_line
from stoker.doctor.report import build_report

CFG = DoctorConfig(interval=0.1)


def write_events(directory, events, pid=100):
    with open(directory / f"events-{pid}.jsonl", "w") as f:
        for e in events:
            f.write(encode_line([e]))


def loop(key, n, wait, compute, t0=1.0):
    events, t = [], t0
    for _ in range(n):
        events.append(Step(key, t, t + wait))
        t += wait + compute
    return events


def samples(t0, t1, cpu_tree=0.5, machine=30.0, cores=4, gpu=None, iowait=0.0):
    out, t = [], t0
    while t <= t1:
        s = {
            "t": t,
            "cpu_tree": cpu_tree,
            "cpu_root": cpu_tree,
            "cpu_cores": [machine] * cores,
            "iowait": iowait,
            "rss": 1e8,
            "procs": 1,
            "read_bps": 0.0,
            "disk_read_bps": 0.0,
            "disk_iops": 0.0,
        }
        if gpu is not None:
            s["gpu"] = [{"util": gpu, "mem_util": 10.0, "mem_used": 1e9, "mem_total": 8e9, "pcie_rx_bps": 1e8}]
        out.append(s)
        t += 0.1
    return out


def info(**kw):
    base = {"kind": "torch", "name": "DataLoader(Toy)", "source": "Toy", "source_id": 7, "batch_size": 32}
    return LoaderDesc(**{**base, **kw})


def report_for(tmp_path, events, smp, gpu_status="no GPU (test)"):
    write_events(tmp_path, events)
    return build_report(tmp_path, smp, gpu_status, CFG, wall=(0.0, 20.0))


def titles(report):
    return [r.title for r in report.recommendations]


def test_long_waits_and_idle_cores_ask_for_workers(tmp_path):
    ev = [LoaderSeen(1, info())] + loop(1, 50, 0.02, 0.005) + [StageSpan(7, "fetch", 1, 1.0, 1.02)]
    r = report_for(tmp_path, ev, samples(1.0, 3.0, cpu_tree=1.0, cores=4))
    assert r.verdict == "input-bound" and 0.75 < r.stall_share < 0.85
    more = next(x for x in r.recommendations if x.title.startswith("More loader workers"))
    assert "num_workers=2" in more.action and "2.8 of 4 cores are idle (the script uses 1.0)" in more.evidence
    assert "loader parallelism" in r.bottleneck_resource


def test_a_machine_busy_with_other_processes_does_not_ask_for_workers(tmp_path):
    ev = [LoaderSeen(1, info())] + loop(1, 50, 0.02, 0.005)
    r = report_for(tmp_path, ev, samples(1.0, 3.0, cpu_tree=0.3, machine=97, cores=4))
    assert r.verdict == "input-bound"
    assert not any(t.startswith("More loader workers") for t in titles(r))
    assert r.bottleneck_resource.startswith("CPU shared with other processes")


def test_busy_cores_do_not_ask_for_workers(tmp_path):
    ev = [LoaderSeen(1, info())] + loop(1, 50, 0.02, 0.005)
    r = report_for(tmp_path, ev, samples(1.0, 3.0, cpu_tree=3.9, machine=98, cores=4))
    assert r.verdict == "input-bound"
    assert not any(t.startswith("More loader workers") for t in titles(r))
    assert r.bottleneck_resource.startswith("CPU (3.9 of 4")


def test_compute_bound_without_gpu_has_no_data_advice(tmp_path):
    ev = [LoaderSeen(1, info())] + loop(1, 50, 0.0005, 0.02)
    r = report_for(tmp_path, ev, samples(1.0, 3.0))
    assert r.verdict == "compute-bound" and r.recommendations == []
    assert "CPU" in r.bottleneck_resource


def test_underused_gpu_asks_for_a_larger_batch_and_pinning(tmp_path):
    ev = [LoaderSeen(1, info(batch_size=16))] + loop(1, 50, 0.0005, 0.02)
    r = report_for(tmp_path, ev, samples(1.0, 3.0, gpu=25.0), gpu_status="NVIDIA Test")
    assert r.verdict == "compute-bound"
    larger = next(x for x in r.recommendations if x.title.startswith("A larger batch"))
    assert "batch_size=32" in larger.action and "25 %" in larger.evidence
    assert any("pin_memory=True" in x.action for x in r.recommendations)


def test_no_pinning_advice_without_a_gpu_or_when_pinned(tmp_path):
    ev = [LoaderSeen(1, info(pin_memory=True))] + loop(1, 50, 0.02, 0.005)
    r = report_for(tmp_path, ev, samples(1.0, 3.0, gpu=90.0), gpu_status="NVIDIA Test")
    assert not any("pin" in x.title.lower() for x in r.recommendations)


def test_padding_asks_for_bucketing(tmp_path):
    batch = BatchDesc("dict", (TensorDesc("input_ids", "int64", (32, 128), "cpu"),), padding=0.7)
    ev = [LoaderSeen(1, info())] + loop(1, 20, 0.001, 0.02) + [BatchSeen(1, batch)]
    r = report_for(tmp_path, ev, samples(1.0, 2.0))
    (b,) = [x for x in r.recommendations if "bucketing" in x.title]
    assert "bucketing=True" in b.action and "70 %" in b.evidence


def test_float_images_ask_for_uint8_and_device_normalization(tmp_path):
    batch = BatchDesc("list", (TensorDesc("0", "float32", (32, 3, 224, 224), "cpu"),))
    ev = [LoaderSeen(1, info())] + loop(1, 20, 0.02, 0.005) + [BatchSeen(1, batch)]
    assert not any(
        "normalize" in x.title for x in report_for(tmp_path, ev, samples(1.0, 2.0)).recommendations
    )  # no GPU: no bus to save
    r = report_for(tmp_path, ev, samples(1.0, 2.0, gpu=50.0), gpu_status="NVIDIA Test")
    (n,) = [x for x in r.recommendations if "normalize" in x.title]
    assert ".float().div_(255)" in n.action and "float32[32, 3, 224, 224]" in n.evidence


def test_io_wait_points_at_the_disk(tmp_path):
    ev = [LoaderSeen(1, info(kind="stoker", store=True, name="stoker.Loader(StoreSource)"))] + loop(1, 40, 0.02, 0.005)
    ev += [StageSpan(1, "read", 1, 1.0, 1.019)] * 40
    r = report_for(tmp_path, ev, samples(1.0, 2.0, iowait=45.0))
    assert r.bottleneck_resource.startswith("disk")
    assert r.bottleneck_stage.startswith("read")
    assert any("faster disk" in x.title for x in r.recommendations)


def test_recommendations_are_ranked_by_gain(tmp_path):
    batch = BatchDesc("list", (TensorDesc("0", "float32", (8, 3, 32, 32), "cpu"),))
    ev = [LoaderSeen(1, info())] + loop(1, 50, 0.02, 0.005) + [BatchSeen(1, batch), StageSpan(7, "fetch", 1, 1.0, 1.02)]
    r = report_for(tmp_path, ev, samples(1.0, 3.0, cpu_tree=0.5, cores=4, gpu=50.0), gpu_status="NVIDIA Test")
    gains = [x.gain_s for x in r.recommendations]
    assert len(gains) >= 3 and gains == sorted(gains, reverse=True)


def test_torn_last_line_is_skipped(tmp_path):
    ev = [LoaderSeen(1, info())] + loop(1, 5, 0.02, 0.005)
    write_events(tmp_path, ev)
    with open(tmp_path / "events-100.jsonl", "a") as f:
        f.write('["step",1,9.0,')
    r = build_report(tmp_path, [], "no GPU", CFG, wall=(0.0, 5.0))
    assert r.loaders[0]["steps"] == 5


@pytest.mark.parametrize("bad", [{"interval": -1}, {"stall_threshold": 0}, {"inspect_batches": -2}, {"out": 3}])
def test_config_validation(bad):
    with pytest.raises(ValueError):
        DoctorConfig(**bad)
