"""stoker.convert.on_ray on a local Ray cluster: the same store as a single-machine conversion, row for row;
label codes agreed across partitions; a task whose worker dies, and the re-run that resumes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.convert import on_ray
from stoker.convert.inputs import TextFiles
from stoker.convert.partitions import plan_text, staging_dir

pytestmark = pytest.mark.ray


def _rows(path) -> dict[str, list]:
    store = path if isinstance(path, stoker.Store) else stoker.open(path)
    batch = store.gather(np.arange(len(store)))
    out = {}
    for name, values in batch.items():
        if hasattr(values, "lengths"):  # Ragged: one array per row
            out[name] = [values[i].tolist() for i in range(len(values))]
        elif isinstance(values, np.ndarray):
            out[name] = values.tolist()
        else:
            out[name] = list(values)
    return out


def _assert_same_store(single: Path, on_ray: Path) -> None:
    a, b = stoker.open(single), stoker.open(on_ray)
    assert len(a) == len(b) > 0
    assert a.schema == b.schema
    assert _rows(single) == _rows(on_ray)


def test_text_equals_the_single_machine_conversion(ray_cluster, corpus, tmp_path):
    parts = plan_text(TextFiles.of(corpus), 4)
    lines = corpus.read_bytes()
    first, last = lines[parts[0].start : parts[0].stop], lines[parts[-1].start : parts[-1].stop]
    assert b"\nc\t" not in first and b"\na\t" not in last  # partitions see different label subsets

    kw = {"max_length": 64, "keep_empty": False}  # empty texts skipped: the counts agree across partitions
    single = stoker.convert.text(corpus, tmp_path / "single", progress=False, **kw)
    result = stoker.convert.on_ray.text(corpus, tmp_path / "ray", partitions=4, **kw)

    _assert_same_store(single.path, result.path)
    rows = _rows(result.path)
    assert rows["labels"][0] == 0 and rows["labels"][-1] == 2  # a=0 ... c=2 in every partition
    file_lines = corpus.read_text().splitlines()
    expected = [n for n, line in enumerate(file_lines, 1) if n > 1 and line.split("\t", 1)[1].strip()]
    assert rows["line"] == expected  # the whole file's line numbers, in every partition
    meta_single = stoker.open(single.path).manifest.metadata
    assert stoker.open(result.path).manifest.metadata == meta_single
    assert meta_single["stoker.text"]["label_names"] == ["a", "b", "c"]
    assert result.rows == single.rows and result.skipped == single.skipped > 0
    assert result.report["partitions"] == 4 and result.report["reused_partitions"] == []
    assert not staging_dir(result.path).exists()


def test_txt_line_numbers_follow_the_whole_file(ray_cluster, corpus, tmp_path):
    txt = tmp_path / "corpus.txt"
    txt.write_text("\n".join(line.split("\t", 1)[1] for line in corpus.read_text().splitlines()[1:]) + "\n")
    single = stoker.convert.text(txt, tmp_path / "single", max_length=32, progress=False)
    result = stoker.convert.on_ray.text(txt, tmp_path / "ray", max_length=32, partitions=3)
    _assert_same_store(single.path, result.path)
    assert "labels" not in stoker.open(result.path).schema


def test_images_equal_the_single_machine_conversion(ray_cluster, photos, tmp_path):
    single = stoker.convert.images(photos, tmp_path / "single", progress=False)
    # 3 ranges of 5 files: each partition sees one class only (ant, moth, zebra), codes 0, 1, 2 still
    result = stoker.convert.on_ray.images(photos, tmp_path / "ray", partitions=3)
    _assert_same_store(single.path, result.path)
    assert _rows(result.path)["label"] == [0] * 5 + [1] * 5 + [2] * 5
    assert stoker.open(result.path).manifest.metadata == stoker.open(single.path).manifest.metadata


def _dying(monkeypatch, *partitions: int) -> None:
    """Fault injection: the Ray workers of ``partitions`` die (``os._exit``, as a killed worker) once their
    attempt is noted. The task shipped to Ray is a closure (Ray pickles it by value) that patches
    ``note_attempt`` in the worker's process around the real task."""
    real_task = on_ray.convert_task

    def convert_task(row, job):
        import os

        from stoker.convert import ray_tasks

        if int(row["index"]) not in partitions:
            return real_task(row, job)
        noted = ray_tasks.note_attempt

        def note_then_die(staging, index):
            noted(staging, index)
            os._exit(1)

        ray_tasks.note_attempt = note_then_die
        try:
            return real_task(row, job)
        finally:
            ray_tasks.note_attempt = noted

    monkeypatch.setattr(on_ray, "convert_task", convert_task)


def test_a_dead_worker_fails_the_conversion_and_the_rerun_resumes(ray_cluster, corpus, tmp_path, monkeypatch):
    dest = tmp_path / "ray"
    staging = staging_dir(dest)
    _dying(monkeypatch, 2)
    with pytest.raises(stoker.WorkerError, match=r"partition\(s\) \[2\] failed 1 time") as info:
        stoker.convert.on_ray.text(corpus, dest, max_length=64, partitions=3, retries=0)
    assert "run the same call again" in str(info.value)
    assert not dest.exists()  # nothing half-made is visible
    finished = sorted(int(p.name[5:10]) for p in staging.glob("part-*.json"))
    assert finished and 2 not in finished
    kept = {os.stat(f).st_ino for i in finished for f in (staging / f"part-{i:05d}").glob("shard-*.arrow")}

    monkeypatch.undo()
    result = stoker.convert.on_ray.text(corpus, dest, max_length=64, partitions=3, retries=0)
    assert result.report["reused_partitions"] == finished  # not converted again:
    assert kept <= {os.stat(f).st_ino for f in dest.glob("shard-*.arrow")}  # their very files were merged
    single = stoker.convert.text(corpus, tmp_path / "single", max_length=64, progress=False)
    _assert_same_store(single.path, dest)
    assert not staging.exists()


def test_a_task_error_is_the_partitions_stoker_error(ray_cluster, corpus, tmp_path):
    with pytest.raises(stoker.InputError, match="not in label_names") as info:
        stoker.convert.on_ray.text(corpus, tmp_path / "ray", max_length=32, partitions=2, label_names=["a", "b"])
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "partition 1" in notes and "run the same call again" in notes
    assert not (tmp_path / "ray").exists()


def test_another_input_in_the_staging_dir_is_refused(ray_cluster, corpus, tmp_path, monkeypatch):
    dest = tmp_path / "ray"
    _dying(monkeypatch, 0)
    with pytest.raises(stoker.WorkerError):
        stoker.convert.on_ray.text(corpus, dest, max_length=64, partitions=2, retries=0)
    monkeypatch.undo()
    with pytest.raises(stoker.ConfigError, match="max_length"):
        stoker.convert.on_ray.text(corpus, dest, max_length=32, partitions=2)
    result = stoker.convert.on_ray.text(corpus, dest, max_length=32, partitions=2, overwrite=True)
    assert result.report["reused_partitions"] == []


def test_a_partition_of_bad_images_only_is_reported_as_the_single_machine_does(ray_cluster, photos, tmp_path):
    import shutil

    root = tmp_path / "photos"
    shutil.copytree(photos, root)
    (root / "bad").mkdir()  # sorted classes: ant, bad, moth, zebra; 5 files each, so partition 1 is all bad
    for i in range(5):
        (root / "bad" / f"notes{i}.jpg").write_text("this is not an image\n")
    single = stoker.convert.images(root, tmp_path / "single", on_error="skip", progress=False)
    result = stoker.convert.on_ray.images(root, tmp_path / "ray", on_error="skip", partitions=4)
    _assert_same_store(single.path, result.path)
    assert result.skipped == single.skipped == 5
    assert _same_reasons(result.report["skipped"]) == _same_reasons(single.report["skipped"])  # rows, files, reasons
    meta = [stoker.open(p).manifest.metadata for p in (single.path, result.path)]
    listed = [_same_reasons(m.pop("skipped")) for m in meta]
    assert len(listed[0]) == 5 and listed[0] == listed[1]
    assert meta[0] == meta[1]  # skipped_count, ignored_count, classes, ...


def _same_reasons(records):
    """Skipped records with the object addresses PIL puts in its messages ("at 0x7f...") taken out."""
    import re

    return [re.sub(r" at 0x[0-9a-f]+", "", repr(r)) for r in records]


def test_text_to_an_object_store_url(ray_cluster, s3, corpus, tmp_path):
    url, opts = f"s3://{s3.bucket()}/corpus", s3.options()
    with pytest.raises(stoker.ConfigError, match="staging="):
        stoker.convert.on_ray.text(corpus, url, max_length=32, storage_options=opts)
    single = stoker.convert.text(corpus, tmp_path / "single", max_length=32, progress=False)
    stage = tmp_path / "stage"
    stoker.convert.on_ray.text(corpus, url, max_length=32, partitions=2, staging=stage, storage_options=opts)
    remote = stoker.open(url, storage_options=opts, cache_dir=tmp_path / "cache")
    assert remote.schema == stoker.open(single.path).schema
    assert _rows(remote) == _rows(single.path)
    names = [info.file for info in remote.manifest.shards]
    assert names[0].startswith("part-00000-shard-00000-") and names[-1].startswith("part-00001-")  # named per part
    assert not stage.exists()
    with pytest.raises(stoker.StoreExistsError, match="holds a store"):
        stoker.convert.on_ray.text(corpus, url, max_length=32, partitions=2, staging=stage, storage_options=opts)
