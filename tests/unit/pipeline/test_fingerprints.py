"""The data fingerprints the ranks compare (pipeline/ranks.py): each changes when one value changes
and stays when nothing does. The torchrun test of the whole check is tests/dist/test_rank_data.py."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
import torch

import stoker
import stoker.text
from stoker.pipeline import ranks
from stoker.pipeline.dataset_source import DatasetSource, sampled_items
from stoker.pipeline.ranks import arrays_fingerprint, data_fingerprint, row_runs
from stoker.pipeline.subset import Subset
from stoker.sources import Arrays
from stoker.store.columns import Ragged
from stoker.text.packing import PackedText, ragged_docs, store_docs


def _x(changed: bool = False) -> np.ndarray:
    x = np.arange(600, dtype=np.float32).reshape(200, 3)
    if changed:
        x[123, 1] += 0.5
    return x


def test_arrays_hash_every_byte_and_not_where_they_live(tmp_path):
    np.save(tmp_path / "x.npy", _x())
    same = {data_fingerprint(Arrays(_x(), np.arange(200))), data_fingerprint(Arrays(_x().copy(), np.arange(200)))}
    same.add(data_fingerprint(Arrays(tmp_path / "x.npy", np.arange(200))))  # memory-mapped
    same.add(
        data_fingerprint(
            stoker.Loader(
                torch.utils.data.TensorDataset(torch.from_numpy(_x()), torch.arange(200)), batch_size=4
            ).source
        )
    )
    assert len(same) == 1
    assert data_fingerprint(Arrays(_x(changed=True), np.arange(200))) not in same
    assert data_fingerprint(Arrays(_x(), np.arange(1, 201))) not in same
    assert data_fingerprint(Arrays(_x().astype(np.float64), np.arange(200))) not in same


def test_big_arrays_hash_a_stated_sample(monkeypatch):
    monkeypatch.setattr(ranks, "WHOLE_BYTES", 1000)
    monkeypatch.setattr(ranks, "SAMPLE_BYTES", 480)
    monkeypatch.setattr(ranks, "SAMPLE_RUNS", 4)
    runs = row_runs(200, 12)  # 10 rows a run, 4 runs spread over the rows, the first and the last included
    assert runs == [(0, 10), (63, 73), (126, 136), (190, 200)]
    base = arrays_fingerprint({"x": _x()})
    inside, outside = _x(), _x()
    inside[195, 0] += 1
    outside[100, 0] += 1
    assert arrays_fingerprint({"x": inside}) != base
    assert arrays_fingerprint({"x": outside}) == base  # outside the sample: unseen, as documented


def test_runs_cover_whole_chunks_and_every_row_when_small():
    assert row_runs(10, 8) == [(0, 10)]
    runs = row_runs(3 * 2**20, 1, unit=1000)
    assert runs[0] == (0, 2**20 + 1000 - 2**20 % 1000) and runs[-1][1] == 3 * 2**20
    assert all(a % 1000 == 0 for a, _ in runs)


def _h5(path, changed=False, **options):
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_x(changed), **options)
        f.create_dataset("y", data=np.arange(200))
    return stoker.sources.HDF5(path)


@pytest.mark.parametrize("options", [{}, {"chunks": (16, 3), "compression": "gzip"}])
def test_hdf5_hashes_the_values_read_not_the_path_or_layout(tmp_path, options):
    base = data_fingerprint(_h5(tmp_path / "a.h5", **options))
    assert data_fingerprint(_h5(tmp_path / "other_name.h5", **options)) == base
    assert data_fingerprint(_h5(tmp_path / "plain.h5")) == base  # another layout, the same values
    assert data_fingerprint(_h5(tmp_path / "b.h5", changed=True, **options)) != base


@pytest.mark.parametrize("options", [{}, {"chunks": (16, 3), "compression": "gzip"}])
def test_a_big_hdf5_file_is_sampled_in_whole_chunks(tmp_path, monkeypatch, options):
    monkeypatch.setattr(ranks, "WHOLE_BYTES", 1000)  # 200 rows of 20 bytes: sampled
    monkeypatch.setattr(ranks, "SAMPLE_BYTES", 1280)
    monkeypatch.setattr(ranks, "SAMPLE_RUNS", 4)
    base = data_fingerprint(_h5(tmp_path / "a.h5", **options))
    assert data_fingerprint(_h5(tmp_path / "b.h5", **options)) == base
    assert data_fingerprint(_h5(tmp_path / "c.h5", changed=True, **options)) != base  # row 123 is in the sample
    assert row_runs(200, 20) == [(0, 16), (61, 77), (122, 138), (184, 200)]
    assert row_runs(200, 20, unit=16) == [(0, 16), (48, 64), (112, 128), (176, 192)]  # whole chunks


def test_a_subset_hashes_its_indices_and_its_parent(tmp_path):
    source = _h5(tmp_path / "a.h5")
    base = data_fingerprint(Subset(source, [3, 4, 5]))
    assert data_fingerprint(Subset(_h5(tmp_path / "b.h5"), [3, 4, 5])) == base
    assert data_fingerprint(Subset(source, [3, 4, 6])) != base
    assert data_fingerprint(Subset(_h5(tmp_path / "c.h5", changed=True), [3, 4, 5])) != base


def test_packed_text_hashes_its_ids_or_its_store(tmp_path):
    def packed(docs):
        rag = Ragged.from_rows(docs, np.int32)
        return PackedText(ragged_docs(rag), rag.lengths, 4)

    base = data_fingerprint(packed([[1, 2, 3], [4, 5, 6, 7]]))
    assert data_fingerprint(packed([[1, 2, 3], [4, 5, 6, 7]])) == base
    assert data_fingerprint(packed([[1, 2, 3], [4, 9, 6, 7]])) != base  # one id, the same lengths
    said = []
    for at, plus in enumerate([0, 0, 1]):  # two stores of the same ids, one with an id changed
        ids = [np.arange(5, dtype=np.int32) + plus * (k == 1) for k in range(3)]
        store = stoker.open(stoker.write(tmp_path / f"s{at}", {"input_ids": ids}))
        said.append(data_fingerprint(PackedText(store_docs(store), np.full(3, 5), 4)))
    assert said[0] == said[1] != said[2] and said[0].startswith("packed:4:store:")


def test_packed_text_loader_from_files(tmp_path):
    for name, word in (("a", "dog"), ("b", "dog"), ("c", "cat")):
        (tmp_path / f"{name}.txt").write_text(f"the {word} sat on the mat\nbirds sing at dawn\n" * 4)
    said = [
        data_fingerprint(stoker.text.Loader(tmp_path / f"{n}.txt", packing=True, max_length=8, batch_size=2).source)
        for n in "abc"
    ]
    assert said[0] == said[1] != said[2]


class Squares(torch.utils.data.Dataset):
    def __init__(self, n=50, change=None, noise=False):
        self.n, self.change, self.noise = n, change, noise

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = torch.full((3,), float(i * i + (i == self.change)))
        if self.noise:  # a random transform drawn from the global generators
            x = x + torch.rand(3) + np.random.rand() + random.random()
        return {"x": x, "label": i % 3, "name": f"item{i}"}


def test_a_dataset_hashes_sampled_items_with_fixed_seeds():
    base = data_fingerprint(DatasetSource(Squares()))
    assert data_fingerprint(DatasetSource(Squares())) == base
    assert data_fingerprint(DatasetSource(Squares(change=49))) != base  # the last item is in the sample
    assert data_fingerprint(DatasetSource(Squares(change=20))) == base  # outside the sample, as documented
    assert data_fingerprint(DatasetSource(Squares(n=51))) != base
    torch.manual_seed(1)
    np.random.seed(1)
    states = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    noisy = data_fingerprint(DatasetSource(Squares(noise=True)))
    assert torch.equal(torch.get_rng_state(), states[0])  # the user's generators are left as they were
    assert np.array_equal(np.random.get_state()[1], states[1]) and random.getstate() == states[2]
    torch.manual_seed(2)
    assert data_fingerprint(DatasetSource(Squares(noise=True))) == noisy  # random transforms draw alike
    assert noisy.endswith(sampled_items(Squares(noise=True))) and "not repeatable" not in noisy


class OwnGenerator(Squares):
    def __init__(self):
        super().__init__()
        self.rng = np.random.default_rng()

    def __getitem__(self, i):
        return self.rng.random(2)


def test_items_that_differ_on_a_second_read_are_left_out():
    assert sampled_items(OwnGenerator()) == "items:not repeatable"


class OpensOnFirstUse(Squares):
    handle = None

    def __getitem__(self, i):
        if self.handle is None:
            self.handle = object()  # as a Dataset opens an HDF5 file in its worker, on first use
        return i


def test_sampled_items_leave_no_handle_opened_in_the_dataset():
    data = OpensOnFirstUse()
    assert sampled_items(data).startswith("items:") and data.handle is None


class Slotted:
    __slots__ = ()

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return i


def test_a_dataset_without_attributes_is_sampled_too():
    assert data_fingerprint(DatasetSource(Slotted())).endswith(sampled_items(Slotted()))


def test_a_dataset_over_a_store_adds_the_store_and_torch_subsets_their_indices(tmp_path):
    class Reads(torch.utils.data.Dataset):
        def __init__(self, path):
            self.store = stoker.open(path)

        def __len__(self):
            return len(self.store)

        def __getitem__(self, i):
            return int(i)

    paths = [stoker.write(tmp_path / f"s{i}", {"x": _x(changed=i == 2)}) for i in range(3)]
    said = [data_fingerprint(DatasetSource(Reads(p))) for p in paths]
    assert said[0] == said[1] != said[2]  # the items alone (row numbers) would not tell
    sub = torch.utils.data.Subset(Squares(), [1, 2, 3])
    assert data_fingerprint(DatasetSource(sub)) != data_fingerprint(
        DatasetSource(torch.utils.data.Subset(Squares(), [1, 2, 4]))
    )


def test_a_fingerprint_that_raises_is_warned_about_and_compared():
    class Broken(Squares):
        def __getitem__(self, i):
            raise KeyError(i)

    with pytest.warns(UserWarning, match="fingerprint could not be taken"):
        assert data_fingerprint(DatasetSource(Broken())) == "unreadable:KeyError"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data_fingerprint(DatasetSource(Squares()))
