"""The contract every batch source and batch sampler of the package passes (and the example source).

Like torchdata.nodes' state test run for every node: for each kind of input, a fresh loader is
built twice and checked for length, determinism for a seed, resume equality at several points,
a second epoch, and an error that names the row. Samplers are checked on their own: pure
function of the epoch, ``start`` skips exactly, fingerprints refuse a changed setting.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import stoker
from stoker.errors import StateError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "vision"))
sys.path.insert(0, str(ROOT / "tests" / "unit" / "text"))

from text_samples import SENTENCES  # noqa: E402
from vision_images import photo, save  # noqa: E402

from parquet_source import ParquetRows  # noqa: E402

N = 53  # rows: a prime, so batches never divide evenly


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        if not 0 <= i < N:
            raise IndexError(f"index {i} out of range")
        return {"x": np.full(3, i * i, dtype=np.int64), "i": i}


def _store(tmp: Path) -> Path:
    rng = np.random.default_rng(0)
    cols = {
        "x": rng.random((N, 4), dtype=np.float32),
        "ids": [np.arange(int(k), dtype=np.int32) for k in rng.integers(1, 9, size=N)],
        "label": np.arange(N, dtype=np.int64),
    }
    return stoker.write(tmp / "store", cols, shard_size=20)


def _hdf5(tmp: Path) -> Path:
    h5py = pytest.importorskip("h5py")
    path = tmp / "data.h5"
    with h5py.File(path, "w") as f:
        f["data"] = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
        f.create_dataset("labels", data=np.arange(N, dtype=np.int64), chunks=(8,), compression="gzip")
    return path


def _images(tmp: Path) -> Path:
    root = tmp / "photos"
    for i in range(12):
        save(root / ("cat" if i % 2 else "dog") / f"{i}.jpg", photo(20 + i, 30 - i, seed=i), quality=90)
    return root


def _parquet(tmp: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp / "t.parquet"
    table = pa.table({"x": np.arange(N, dtype=np.float64) * 0.5, "y": np.arange(N, dtype=np.int32)})
    pq.write_table(table, path, row_group_size=10)
    return path


def _text(**options):
    texts = SENTENCES * 4
    data = texts if options.get("packing") else {"text": texts, "label": list(range(len(texts)))}
    return lambda tmp: stoker.text.Loader(
        data, tokenizer="bert-base-uncased", batch_size=5, max_length=32, seed=3, **options
    )


# Each case: (name, make(tmp) -> a fresh Loader). Built twice per check to compare runs.
CASES = {
    "store": lambda tmp: stoker.Loader(_store(tmp), batch_size=7, shuffle=True, seed=3, num_workers=2),
    "store-block": lambda tmp: stoker.Loader(
        _store(tmp), batch_size=6, shuffle="block", block_size=8, window=2, seed=3
    ),
    "arrays": lambda tmp: stoker.Loader(
        stoker.sources.Arrays(np.arange(N * 2).reshape(N, 2), np.arange(N)), batch_size=8, shuffle=True, seed=3
    ),
    "subset": lambda tmp: stoker.Loader(stoker.Subset(_store(tmp), range(3, N)), batch_size=7, shuffle=True, seed=3),
    "tensordataset": lambda tmp: stoker.Loader(
        torch.utils.data.TensorDataset(torch.arange(N), torch.arange(N) * 2), batch_size=8, shuffle=True, seed=3
    ),
    "dataset-inline": lambda tmp: stoker.Loader(Squares(), batch_size=8, shuffle=True, seed=3, num_workers=0),
    "dataset-processes": lambda tmp: stoker.Loader(Squares(), batch_size=8, shuffle=True, seed=3, num_workers=2),
    "dataset-collate": lambda tmp: stoker.Loader(
        Squares(),
        batch_size=8,
        shuffle=True,
        seed=3,
        num_workers=0,
        collate_fn=lambda s: {"i": np.asarray([x["i"] for x in s])},
    ),
    "hdf5": lambda tmp: stoker.Loader(
        stoker.sources.HDF5(_hdf5(tmp), "data,labels"), batch_size=8, shuffle=True, seed=3
    ),
    "images": lambda tmp: stoker.Loader(
        stoker.vision.ImageSource(_images(tmp), stoker.vision.train_transforms(16), seed=3, with_paths=True),
        batch_size=5,
        shuffle=True,
        seed=3,
    ),
    "text-bucketed": _text(shuffle=True),
    "text-plain": _text(shuffle=True, bucketing=False),
    "text-packed": _text(shuffle=True, packing=True),
    "parquet-example": lambda tmp: stoker.Loader(
        ParquetRows(_parquet(tmp)), batch_size=8, shuffle=True, seed=3, num_workers=2
    ),
}


def _leaves(batch):
    if isinstance(batch, dict):
        return [(k, x) for key in sorted(batch) for k, x in _leaves(batch[key])]
    if isinstance(batch, (list, tuple)) and batch and not isinstance(batch[0], (str, bytes)):
        return [x for item in batch for x in _leaves(item)]
    return [("", batch.numpy() if isinstance(batch, torch.Tensor) else batch)]


def _same(a, b) -> bool:
    la, lb = _leaves(a), _leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for (_, x), (_, y) in zip(la, lb))


@pytest.fixture(params=sorted(CASES))
def case(request, tmp_path):
    make = CASES[request.param]
    built = []

    def fresh():
        where = tmp_path / f"run{len(built)}"
        where.mkdir()
        loader = make(where)
        built.append(loader)
        return loader

    yield fresh
    for loader in built:
        loader.close()


def test_length_and_kinds(case):
    loader = case()
    assert isinstance(loader.source, stoker.BatchSource)
    assert isinstance(loader.batch_sampler, stoker.BatchSampler)
    assert len(loader.source) > 0
    assert len(list(loader)) == len(loader) == len(loader.batch_sampler)


def test_same_seed_same_batches_and_a_new_epoch_differs(case):
    first, again = case(), case()
    one = list(first)
    assert all(_same(a, b) for a, b in zip(one, list(again)))
    two = list(first)  # the next epoch
    assert len(two) == len(one) and not all(_same(a, b) for a, b in zip(one, two))


def test_resume_at_any_point_gives_the_tail(case):
    full = list(case())
    for k in sorted({0, 1, len(full) // 2, len(full) - 1}):
        loader = case()
        it = iter(loader)
        for _ in range(k):
            next(it)
        state = json.loads(json.dumps(loader.state_dict()))  # a state survives JSON
        it.close()
        resumed = case()
        resumed.load_state_dict(state)
        rest = list(resumed)
        assert len(rest) == len(full) - k
        assert all(_same(a, b) for a, b in zip(rest, full[k:])), f"resumed after {k} batches"


def test_a_bad_row_is_named(case):
    source = case().source
    bad = len(source) + 7
    with pytest.raises(Exception) as info:
        source.read([np.asarray([0, bad], dtype=np.int64)])
    text = " ".join([str(info.value), *getattr(info.value, "__notes__", [])])
    assert str(bad) in text


def test_sampler_is_a_pure_function_of_the_epoch(case):
    loader = case()
    sampler, n = loader.batch_sampler, len(loader.source)
    epoch0 = [b.copy() for b in sampler.batches(0)]
    assert len(epoch0) == len(sampler)
    assert all(np.array_equal(a, b) for a, b in zip(epoch0, sampler.batches(0)))
    for start in (1, len(epoch0) - 1):
        assert all(np.array_equal(a, b) for a, b in zip(sampler.batches(0, start), epoch0[start:]))
    rows = np.concatenate(epoch0)
    assert rows.min() >= 0 and rows.max() < n


def test_fingerprint_refuses_a_changed_setting(case):
    sampler = case().batch_sampler
    mine = json.loads(json.dumps(sampler.fingerprint()))
    sampler.check_fingerprint(mine)
    for key, value in mine.items():
        changed = {**mine, key: "something else" if not isinstance(value, str) else value + "!"}
        with pytest.raises(StateError, match=key):
            sampler.check_fingerprint(changed)


def _image_rows(loader, batch):
    row_of = {p: i for i, p in enumerate(loader.source.paths(np.arange(len(loader.source))))}
    return [row_of[p] for p in batch["path"]]


# Each case's rows as numbers of the loader's source, read back from a batch (the data hold them).
ROWS = {
    "store": lambda loader, b: b["label"],
    "store-block": lambda loader, b: b["label"],
    "arrays": lambda loader, b: b[1],
    "subset": lambda loader, b: b["label"] - 3,
    "tensordataset": lambda loader, b: b[0],
    "dataset-inline": lambda loader, b: b["i"],
    "dataset-processes": lambda loader, b: b["i"],
    "dataset-collate": lambda loader, b: b["i"],
    "hdf5": lambda loader, b: b["labels"],
    "images": _image_rows,
    "text-bucketed": lambda loader, b: b["labels"],
    "text-plain": lambda loader, b: b["labels"],
    "parquet-example": lambda loader, b: b["y"],
}


def test_rows_inside_a_batch_come_in_the_samplers_order(case, request):
    """As from a torch DataLoader: a shuffled batch's rows in the order the sampler drew them."""
    loader = case()
    name = request.node.callspec.params["case"]
    planned = [np.asarray(b) for b in loader.batch_sampler.batches(0)]
    batches = list(loader)
    assert len(batches) == len(planned)
    if name == "text-packed":  # a row is a block of the packed stream: each row read alone must match
        for rows, batch in zip(planned, batches):
            alone = [loader.source.read([rows[k : k + 1]])[0]["input_ids"][0] for k in range(len(rows))]
            assert np.array_equal(np.asarray(batch["input_ids"]), np.stack(alone))
        return
    assert any(not np.array_equal(rows, np.sort(rows)) for rows in planned)  # the test can fail
    for rows, batch in zip(planned, batches):
        assert np.array_equal(np.asarray(ROWS[name](loader, batch)), rows)
