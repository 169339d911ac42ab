"""Conversions reading their input from the loopback S3 server (``convert/inputs.py``, ``remote/objects.py``):
text objects under a prefix or a pattern and an image prefix equal the conversion of the same files on disk,
through both clients; a missing bucket, an empty prefix and wrong credentials are short StokerErrors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.cli.main import main
from stoker.errors import EmptyDatasetError, InputError, StoreError, StoreNotFoundError

sys.path.insert(0, str(Path(__file__).parent.parent / "unit" / "vision"))
from vision_images import photo, save  # noqa: E402

TSV_A = "label\ttext\nb\tthe first object\na\tits second line\n"
TSV_B = "label\ttext\nc\tthe second object\na\tno newline at its end"


@pytest.fixture(params=["obstore", "fsspec"])
def client(request, s3, monkeypatch):
    if request.param == "obstore":
        pytest.importorskip("obstore", reason="these runs need obstore: pip install 'stoker[remote]'")
    monkeypatch.setenv("STOKER_REMOTE_CLIENT", request.param)
    return request.param


def _put(s3, bucket: str, files: dict[str, bytes]) -> None:
    for key, body in files.items():
        s3.client().put_object(Bucket=bucket, Key=key, Body=body)


def rows(path) -> dict[str, list]:
    ds = stoker.open(path)
    batch = ds.gather(np.arange(len(ds)))
    return {
        k: [v[i].tolist() for i in range(len(v))] if hasattr(v, "lengths") else list(np.asarray(v).tolist())
        for k, v in batch.items()
    }


def test_text_objects_under_a_pattern_equal_the_joined_file(client, s3, tmp_path):
    bucket = s3.bucket()
    _put(s3, bucket, {"c/a.tsv": TSV_A.encode(), "c/b.tsv": TSV_B.encode(), "c/notes.md": b"not text input"})
    local = tmp_path / "joined.tsv"  # what the objects read as: one header, a newline after the last line
    local.write_text(TSV_A + TSV_B.split("\n", 1)[1] + "\n")
    single = stoker.convert.text(local, tmp_path / "local", max_length=16, progress=False)
    url = f"s3://{bucket}/c/*.tsv"
    remote = stoker.convert.text(url, tmp_path / "remote", max_length=16, progress=False)
    assert rows(remote.path) == rows(single.path)
    assert rows(remote.path)["labels"] == [1, 0, 2, 0]  # a, b, c numbered over both objects
    meta = stoker.open(remote.path).metadata["stoker.text"]
    assert meta["source"] == url and meta["label_names"] == ["a", "b", "c"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".stoker-input-")]  # the staged copy is gone


def test_one_text_object_and_the_cli(s3, tmp_path, capsys):
    bucket = s3.bucket()
    lines = "a line\nanother line\n"
    _put(s3, bucket, {"corpus.txt": lines.encode()})
    assert main(["convert", "text", f"s3://{bucket}/corpus.txt", str(tmp_path / "s"), "--max-length", "8"]) == 0
    assert "2 examples" in capsys.readouterr().out.replace(",", "")
    assert rows(tmp_path / "s")["line"] == [1, 2]


def test_an_image_prefix_equals_the_local_folder(client, s3, tmp_path):
    bucket = s3.bucket()
    folder = tmp_path / "photos"
    for c, cls in enumerate(["moth", "ant"]):
        for i in range(3):
            save(folder / cls / f"{i}.jpg", photo(40 + 4 * i, 48, seed=3 * c + i), quality=90)
    _put(s3, bucket, {f"photos/{p.relative_to(folder).as_posix()}": p.read_bytes() for p in folder.rglob("*.jpg")})
    single = stoker.convert.images(folder, tmp_path / "local", progress=False)
    url = f"s3://{bucket}/photos/"
    remote = stoker.convert.images(url, tmp_path / "remote", progress=False)
    assert rows(remote.path) == rows(single.path)
    assert rows(remote.path)["path"][0] == "ant/0.jpg"
    assert stoker.open(remote.path).metadata["root"] == url
    assert main(["convert", "images", url, str(tmp_path / "cli"), "--mode", "resized", "--size", "16"]) == 0
    assert len(stoker.open(tmp_path / "cli")) == 6


def short(exc: BaseException) -> str:
    text = str(exc)
    assert len(text) < 300 and "\n" not in text and exc.__cause__ is not None, text
    return text


def test_a_missing_bucket_an_empty_prefix_and_bad_credentials(client, s3, tmp_path, monkeypatch):
    with pytest.raises(StoreNotFoundError) as info:
        stoker.convert.text("s3://missing-bucket/c/*.txt", tmp_path / "a", progress=False)
    assert "missing-bucket does not exist" in short(info.value)
    bucket = s3.bucket()
    _put(s3, bucket, {"c/a.txt": b"x\n"})
    with pytest.raises(EmptyDatasetError, match=r"no objects matching '\*.tsv' under s3://.*/c/"):
        stoker.convert.text(f"s3://{bucket}/c/*.tsv", tmp_path / "b", progress=False)
    with pytest.raises(EmptyDatasetError, match="no objects under"):
        stoker.convert.images(f"s3://{bucket}/nothing-here/", tmp_path / "c", progress=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # no credentials anywhere (moto checks no secret)
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    with pytest.raises(StoreError, match="no usable credentials") as info:
        stoker.convert.text(f"s3://{bucket}/c/", tmp_path / "d", progress=False)
    assert "AWS_ACCESS_KEY_ID" in str(info.value)


def test_objects_with_other_headers_or_formats_are_refused(s3, tmp_path):
    bucket = s3.bucket()
    _put(
        s3, bucket, {"c/a.tsv": TSV_A.encode(), "c/b.tsv": b"label\tbody\nx\ty\n", "d/a.txt": b"1\n", "d/b.md": b"2\n"}
    )
    with pytest.raises(InputError, match="header line"):
        stoker.convert.text(f"s3://{bucket}/c/", tmp_path / "a", progress=False)
    with pytest.raises(InputError, match="different suffixes"):
        stoker.convert.text(f"s3://{bucket}/d/", tmp_path / "b", progress=False)
