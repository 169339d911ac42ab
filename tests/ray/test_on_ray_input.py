"""stoker.convert.on_ray reading its input from the loopback S3 server: text objects cut into partitions that
each task reads by byte ranges, an image prefix whose images each task downloads; the stores equal the
single-machine conversions of the same objects, row for row."""

from __future__ import annotations

import pytest

import stoker

from .test_on_ray import _assert_same_store, _rows

pytestmark = pytest.mark.ray


def _put(s3, bucket: str, files: dict[str, bytes]) -> None:
    for key, body in files.items():
        s3.client().put_object(Bucket=bucket, Key=key, Body=body)


def test_text_objects_on_ray_equal_the_single_machine_conversion(ray_cluster, s3, corpus, tmp_path):
    lines = corpus.read_text().splitlines()
    header, body = lines[0], lines[1:]
    half = len(body) // 2
    bucket = s3.bucket()
    _put(
        s3,
        bucket,
        {
            "c/1.tsv": ("\n".join([header, *body[:half]]) + "\n").encode(),
            "c/2.tsv": "\n".join([header, *body[half:]]).encode(),  # no newline at its end
            "c/readme.md": b"left out by the pattern",
        },
    )
    url, opts = f"s3://{bucket}/c/*.tsv", s3.options()
    kw = {"max_length": 32, "keep_empty": False, "storage_options": opts}
    single = stoker.convert.text(url, tmp_path / "single", progress=False, **kw)
    result = stoker.convert.on_ray.text(url, tmp_path / "ray", partitions=4, **kw)
    _assert_same_store(single.path, result.path)
    assert _rows(result.path)["labels"][-1] == 2 and result.report["partitions"] == 4
    assert stoker.open(result.path).metadata == stoker.open(single.path).metadata
    assert stoker.open(result.path).metadata["stoker.text"]["source"] == url


def test_an_image_prefix_on_ray_equals_the_single_machine_conversion(ray_cluster, s3, photos, tmp_path):
    bucket = s3.bucket()
    _put(s3, bucket, {f"p/{f.relative_to(photos).as_posix()}": f.read_bytes() for f in photos.rglob("*.jpg")})
    url, opts = f"s3://{bucket}/p/", s3.options()
    single = stoker.convert.images(url, tmp_path / "single", progress=False, storage_options=opts)
    result = stoker.convert.on_ray.images(url, tmp_path / "ray", partitions=3, storage_options=opts)
    _assert_same_store(single.path, result.path)
    assert stoker.open(result.path).metadata == stoker.open(single.path).metadata
    assert stoker.open(result.path).metadata["root"] == url
    assert _rows(result.path)["path"][0] == "ant/img0.jpg"
    assert not (tmp_path / ".ray.ray-parts").exists()
