"""stoker.convert (convert/__init__.py): one signature shape, one result type, for every kind of input."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import stoker
import stoker.convert
from stoker.convert import ConvertResult
from stoker.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parent.parent / "vision"))
from vision_images import corrupt_files  # noqa: E402

KINDS = ("arrays", "dataset", "hdf5", "images", "table", "text")
SHARED = ("overwrite", "shard_size", "progress", "workers", "metadata")


def test_the_public_surface():
    assert set(stoker.convert.__all__) == {"ConvertOptions", "ConvertResult", "on_ray", *KINDS}
    for name in stoker.convert.__all__:
        assert getattr(stoker.convert, name) is not None


@pytest.mark.parametrize("kind", KINDS)
def test_every_function_has_a_real_signature_with_the_shared_keywords(kind):
    params = inspect.signature(getattr(stoker.convert, kind)).parameters
    assert not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params.values())
    assert list(params)[:2] == ["src", "store"]
    shared = [name for name in SHARED if name in params]
    assert shared == list(SHARED) if kind != "table" else shared == ["overwrite", "shard_size", "progress", "metadata"]
    assert all(params[name].kind == params[name].KEYWORD_ONLY for name in shared)


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n: int, bad=()) -> None:
        self.n, self.bad = n, set(bad)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i in self.bad:
            raise ValueError(f"bad {i}")
        return np.full(3, i, np.int32), i


def _inputs(kind: str, tmp_path: Path):
    """(call, rows, skipped) for one small input of each kind."""
    if kind == "arrays":
        return lambda **kw: stoker.convert.arrays({"x": np.arange(40)}, tmp_path / "s", **kw), 40, 0
    if kind == "hdf5":
        h5py = pytest.importorskip("h5py")
        with h5py.File(tmp_path / "d.h5", "w") as f:
            f["x"] = np.arange(60, dtype=np.float32).reshape(30, 2)
        return lambda **kw: stoker.convert.hdf5(tmp_path / "d.h5", tmp_path / "s", "x", **kw), 30, 0
    if kind == "table":
        (tmp_path / "t.csv").write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(25)))
        return lambda **kw: stoker.convert.table(tmp_path / "t.csv", tmp_path / "s", **kw), 25, 0
    if kind == "text":
        texts = ["one line", "", "two words here", "  ", "last"]
        return lambda **kw: stoker.convert.text(texts, tmp_path / "s", max_length=16, keep_empty=False, **kw), 3, 2
    if kind == "dataset":
        return lambda **kw: stoker.convert.dataset(Pairs(50, bad=[7, 30]), tmp_path / "s", on_error="skip", **kw), 48, 2
    corrupt_files(tmp_path)  # images: one good file and four bad ones in tmp_path / "bad"
    return lambda **kw: stoker.convert.images(tmp_path / "bad", tmp_path / "s", on_error="skip", **kw), 1, 4


@pytest.mark.parametrize("kind", KINDS)
def test_every_function_returns_a_result_with_rows_skipped_and_the_users_metadata(kind, tmp_path):
    call, rows, skipped = _inputs(kind, tmp_path)
    seen: list[int] = []
    kw = {"workers": 1} if kind != "table" else {}
    result = call(progress=seen.append, metadata={"made_by": "test"}, shard_size="1KB", **kw)
    assert isinstance(result, ConvertResult)
    assert result.path == tmp_path / "s" and (result.rows, result.skipped) == (rows, skipped)
    assert result.seconds > 0 and isinstance(result.report, dict)
    ds = stoker.open(result)  # a result goes where a path goes
    assert len(ds) == rows and ds.metadata["made_by"] == "test"
    assert sum(seen) == rows + (skipped if kind in ("images", "dataset") else 0)  # items done, as they were done
    with pytest.raises(stoker.errors.StoreExistsError):
        call(progress=False)
    assert call(progress=False, overwrite=True).rows == rows


BAD = [("shard_size", "huge"), ("workers", -2), ("progress", "on")]


@pytest.mark.parametrize(
    ("kind", "option", "value"),
    [(k, o, v) for k in KINDS for o, v in BAD if not (k == "table" and o == "workers")],  # table has no workers
)
def test_a_bad_shared_option_fails_before_anything_is_written(kind, option, value, tmp_path):
    call, _, _ = _inputs(kind, tmp_path)
    with pytest.raises(ConfigError) as info:
        call(**{option: value})
    assert info.value.option == option
    assert not (tmp_path / "s").exists()


def test_reports_by_kind(tmp_path):
    call, _, _ = _inputs("images", tmp_path)
    report = call(progress=False).report
    assert sorted(s.file for s in report["skipped"]) == ["corrupt.jpg", "empty.jpg", "notes.jpg", "truncated.jpg"]
    call, _, _ = _inputs("dataset", tmp_path)
    assert call(progress=False, overwrite=True, workers=0).report["skipped_indices"] == [7, 30]
    call, _, _ = _inputs("text", tmp_path)
    assert call(progress=False, overwrite=True).report["skipped_empty"] == 2
    call, _, _ = _inputs("arrays", tmp_path)
    assert call(progress=False, overwrite=True).report["source"] == {"kind": "arrays", "columns": ["x"]}


def test_slab_conversions_need_a_writer(tmp_path):
    with pytest.raises(ConfigError, match=r"workers must be at least 1 \(shards written at once\), got 0"):
        stoker.convert.arrays({"x": np.arange(4)}, tmp_path / "s", workers=0)
