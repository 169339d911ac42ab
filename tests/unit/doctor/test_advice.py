"""Verdict and recommendations from synthetic events: each rule fires on its evidence and only then."""

import pytest

from stoker.doctor.config import DoctorConfig
from stoker.doctor.events import (
    BatchDesc,
    BatchSeen,
    LoaderDesc,
    LoaderSeen,
    Probe,
    StageSpan,
    Step,
    TensorDesc,
    encode_line,
)
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


def _slow_getitem(key=1, source_id=7, n=40, t0=1.0, batch=32):
    """A torch loader whose fetches of ``batch`` samples take 20 ms each."""
    return loop(key, n, 0.02, 0.005, t0) + [StageSpan(source_id, "fetch", 1, t0, t0 + 0.02, batch)] * n


def test_a_random_getitem_over_an_image_folder_is_told_to_store_encoded_images(tmp_path):
    desc = info(image_root="/data/photos", dataset_ref="train:train_set")
    image = BatchDesc("list", (TensorDesc("0", "float32", (32, 3, 160, 160), "cpu"),))
    ev = [LoaderSeen(1, desc), Probe(7, True, 0), BatchSeen(1, image)] + _slow_getitem()
    r = report_for(tmp_path, ev, samples(1.0, 2.0, cpu_tree=3.9, machine=98))
    assert not any(t.startswith("Precompute") for t in titles(r))  # a store of its outputs freezes the crops
    (rec,) = [x for x in r.recommendations if "encoded" in x.title]
    assert "stoker convert images /data/photos stores/photos" in rec.action
    assert "ImageSource('stores/photos', stoker.vision.train_transforms(160))" in rec.action
    assert "batch_size=32" in rec.action and "different samples" in rec.evidence
    assert "cuda" not in rec.action  # no GPU sampled: no device="cuda" to fail on this machine


def test_a_random_transform_attribute_without_a_folder_asks_to_augment_per_batch(tmp_path):
    desc = info(dataset_ref="train:train_set", random_transforms=("RandomCrop",))
    ev = [LoaderSeen(1, desc), Probe(7, False, 0)] + _slow_getitem()
    r = report_for(tmp_path, ev, samples(1.0, 2.0, cpu_tree=3.9, machine=98))
    assert not any(t.startswith("Precompute") for t in titles(r))
    (rec,) = [x for x in r.recommendations if "augment each batch" in x.title]
    assert "stoker convert dataset train:train_set stores/toy" in rec.action and "RandomCrop" in rec.evidence


def test_a_deterministic_getitem_gets_the_exact_convert_command(tmp_path):
    desc = info(dataset_ref="train:Toy", dataset_note="importing train.py runs its training loop")
    ev = [LoaderSeen(1, desc), Probe(7, False, 0)] + _slow_getitem()
    r = report_for(tmp_path, ev, samples(1.0, 2.0, cpu_tree=3.9, machine=98))
    (pre,) = [x for x in r.recommendations if x.title.startswith("Precompute")]
    assert pre.action.startswith("once: stoker convert dataset train:Toy stores/toy (importing train.py runs")
    assert 'stoker.Loader("stores/toy", batch_size=32, shuffle=True)' in pre.action
    assert "stoker.write" not in pre.action
    desc = info(image_root="/data/photos")
    r = report_for(tmp_path, [LoaderSeen(1, desc), Probe(7, False, 0)] + _slow_getitem(), samples(1.0, 2.0))
    (pre,) = [x for x in r.recommendations if x.title.startswith("Precompute")]
    assert "stoker convert images /data/photos stores/photos --mode resized --size 224" in pre.action


def test_getitem_is_counted_per_sample(tmp_path):
    ev = [LoaderSeen(1, info())] + _slow_getitem(n=26, batch=32)
    r = report_for(tmp_path, ev, samples(1.0, 2.0))
    row = r.loaders[0]["stages"][0]
    assert row["stage"] == "Toy.__getitem__" and row["calls"] == 26 * 32 and row["unit"] == "sample"
    assert abs(row["ms_per_call"] - 20.0 / 32) < 1e-6


def test_two_loaders_of_one_name_are_told_apart_with_their_real_batch_sizes(tmp_path):
    big = BatchDesc("dict", (TensorDesc("x", "float32", (256, 4), "cpu"),))
    small = BatchDesc("dict", (TensorDesc("x", "float32", (8, 4), "cpu"),))
    desc = info(kind="stoker", name="stoker.Loader(Toy)", batch_size=None, source_id=-1)
    ev = [LoaderSeen(1, desc), LoaderSeen(2, desc), BatchSeen(1, big), BatchSeen(2, small)]
    ev += loop(1, 20, 0.02, 0.005, t0=1.0) + loop(2, 20, 0.02, 0.005, t0=1.6)
    ev += [StageSpan(1, "read", 1, 1.0, 1.02)] * 20 + [StageSpan(2, "read", 1, 1.6, 1.62)] * 20
    r = report_for(tmp_path, ev, samples(1.0, 2.2, cpu_tree=1.0, cores=4))
    names = [ld["name"] for ld in r.loaders]
    assert sorted(names) == ["stoker.Loader(Toy) (#1, batch_size=256)", "stoker.Loader(Toy) (#2, batch_size=8)"]
    assert sorted(ld["batch_size"] for ld in r.loaders) == [8, 256]
    for rec in r.recommendations:
        assert rec.loader in names
    pre = {x.loader: x.action for x in r.recommendations if x.title.startswith("Precompute")}
    assert "batch_size=256" in pre["stoker.Loader(Toy) (#1, batch_size=256)"]
    assert "batch_size=8," in pre["stoker.Loader(Toy) (#2, batch_size=8)"]


def test_the_message_does_not_repeat_the_verdict(tmp_path):
    r = report_for(tmp_path, [LoaderSeen(1, info())] + loop(1, 50, 0.02, 0.005), samples(1.0, 3.0))
    assert r.verdict == "input-bound" and "bound" not in r.message
    assert r.message.startswith("80 % of the loop's")


def _image_advice(tmp_path, random, **kw):
    desc = info(image_root="/data/photos", dataset_ref="train:train_set", **kw)
    image = BatchDesc("list", (TensorDesc("0", "uint8", (32, 3, 128, 128), "cpu"),))
    ev = [LoaderSeen(1, desc), Probe(7, random, 0), BatchSeen(1, image)] + _slow_getitem()
    r = report_for(tmp_path, ev, samples(1.0, 2.0, cpu_tree=3.9, machine=98))
    (rec,) = [x for x in r.recommendations if "store" in x.title.lower()]
    return rec


def test_a_squash_resize_is_kept_not_turned_into_resize_and_center_crop(tmp_path):
    squash = "stoker.vision.Compose([stoker.vision.Resize((128, 128))])"
    rec = _image_advice(tmp_path, False, transforms=squash)
    assert "--mode resized" not in rec.action  # a resized store center-crops
    assert f"ImageSource('stores/photos', {squash})" in rec.action


def test_resize_and_center_crop_of_the_batch_size_get_the_resized_store(tmp_path):
    same = "stoker.vision.Compose([stoker.vision.Resize(128), stoker.vision.CenterCrop(128)])"
    rec = _image_advice(tmp_path, False, transforms=same)
    assert "stoker convert images /data/photos stores/photos --mode resized --size 128 (your Dataset's" in rec.action


def test_unknown_deterministic_transforms_are_said_in_words(tmp_path):
    rec = _image_advice(tmp_path, False)
    assert "--mode resized --size 128 (the store's images are the shorter side resized to 128" in rec.action
    assert "a squash to 128x128" in rec.action and "stoker convert dataset train:train_set" in rec.action


def test_a_random_crop_is_kept_without_a_flip(tmp_path):
    crop = "stoker.vision.Compose([stoker.vision.RandomCrop((128, 128))])"
    rec = _image_advice(tmp_path, True, transforms=crop, random_transforms=("RandomCrop",))
    assert f"ImageSource('stores/photos', {crop})" in rec.action
    assert "train_transforms" not in rec.action and "Flip" not in rec.action


def test_unknown_random_transforms_say_what_train_transforms_draws(tmp_path):
    rec = _image_advice(tmp_path, True, transforms_left="MyCrop")
    assert "stoker.vision.train_transforms(128)" in rec.action
    assert "RandomResizedCrop(128): a random area" in rec.action and "RandomHorizontalFlip()" in rec.action
    assert "(MyCrop)" in rec.action and "stoker.vision.RandomCrop(128)" in rec.action
