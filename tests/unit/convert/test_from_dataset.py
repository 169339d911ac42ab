"""Any torch Dataset into a store: parallel, schema inference and checks, on_error, resume."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

import stoker
from stoker.convert.from_dataset import ResumeWarning, resume_index, staging_dir
from stoker.errors import SampleError, SchemaError, StoreExistsError


class Samples(torch.utils.data.Dataset):
    def __init__(self, n=200, bad=(), log=None):
        self.n, self.bad, self.log = n, set(bad), log

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(f"{i}\n")
        if i in self.bad:
            raise KeyError(f"sample {i} is broken")
        return {
            "image": torch.full((2, 3), i % 256, dtype=torch.uint8),
            "label": i,
            "score": np.float32(i / 2),
            "name": f"s{i}",
            "raw": bytes([i % 256]) * (i % 3),
            "meta": {"tokens": list(range(i % 4))},
        }


def test_every_kind_of_field_round_trips(tmp_path):
    out = stoker.convert.dataset(
        Samples(),
        tmp_path / "s",
        workers=2,
        shard_size=2000,
        schema={"meta.tokens": stoker.Sequence("int32")},
        progress=False,
    )
    ds = stoker.open(out)
    assert ds.schema == {
        "image": stoker.Tensor("uint8", (2, 3)),
        "label": stoker.Scalar("int64"),
        "score": stoker.Scalar("float32"),
        "name": stoker.String(),
        "raw": stoker.Binary(),
        "meta.tokens": stoker.Sequence("int32"),
    }
    assert len(ds) == 200 and ds.num_shards > 1
    row = ds[7]
    assert row["image"].tolist() == [[7] * 3] * 2 and row["label"] == 7 and row["score"] == 3.5
    assert row["name"] == "s7" and row["raw"] == b"\x07" and row["meta.tokens"].tolist() == [0, 1, 2]
    assert ds[:]["label"].tolist() == list(range(200))
    assert not staging_dir(tmp_path / "s").exists()


def test_tuple_samples_named(tmp_path):
    ds = torch.utils.data.TensorDataset(torch.arange(10), torch.ones(10, 2))
    store = stoker.open(stoker.convert.dataset(ds, tmp_path / "t", workers=0, names=["x", "y"]))
    assert list(store.schema) == ["x", "y"] and store[:]["x"].tolist() == list(range(10))
    plain = stoker.open(stoker.convert.dataset(ds, tmp_path / "u", workers=0))
    assert list(plain.schema) == ["0", "1"]


def test_error_names_the_index_and_keeps_finished_shards(tmp_path):
    with pytest.raises(
        SampleError, match=r"dataset\[150\] raised KeyError: 'sample 150 is broken'.*on_error='skip'"
    ) as info:
        stoker.convert.dataset(Samples(bad=[150]), tmp_path / "s", workers=2, shard_size=1000, chunk_size=16)
    assert info.value.index == 150 and isinstance(info.value.__cause__, KeyError)
    assert not (tmp_path / "s").exists()
    assert any(p.name.startswith("shard-") for p in staging_dir(tmp_path / "s").iterdir())


def test_resume_after_a_failure_reads_only_the_rest(tmp_path):
    log = tmp_path / "calls.txt"
    with pytest.raises(SampleError):
        stoker.convert.dataset(Samples(bad=[150]), tmp_path / "s", workers=0, shard_size=1000, chunk_size=16)
    log.unlink(missing_ok=True)
    with pytest.warns(ResumeWarning, match=r"resuming at row (\d+)") as warned:
        out = stoker.convert.dataset(Samples(log=log), tmp_path / "s", workers=0, shard_size=1000, chunk_size=16)
    resumed = out.report["resumed_at"]
    assert 50 < resumed <= 150 and f"resuming at row {resumed} " in str(warned[0].message)
    early = {int(x) for x in log.read_text().split()} & set(range(resumed))
    assert len(early) <= 6  # only the fingerprint's few samples: the finished shards were not computed again
    assert stoker.open(out)[:]["label"].tolist() == list(range(200))


def test_resume_refuses_other_input(tmp_path):
    with pytest.raises(SampleError):
        stoker.convert.dataset(Samples(bad=[150]), tmp_path / "s", workers=0, shard_size=1000)
    with pytest.raises(stoker.errors.ConfigError, match="partial write of other input"):
        stoker.convert.dataset(Samples(n=300), tmp_path / "s", workers=0, shard_size=1000)


def test_skip_counts_and_lists_failures(tmp_path):
    out = stoker.convert.dataset(
        Samples(bad=[3, 150, 199]), tmp_path / "s", workers=2, on_error="skip", shard_size=1000
    )
    ds = stoker.open(out)
    assert ds.metadata["skipped"] == 3 and ds.metadata["skipped_indices"] == [3, 150, 199]
    assert ds[:]["label"].tolist() == [i for i in range(200) if i not in (3, 150, 199)]


def test_skip_then_resume_keeps_positions(tmp_path):
    with pytest.raises(KeyboardInterrupt):  # skips 10, then is interrupted at 150
        stoker.convert.dataset(
            _FailAt(Samples(bad=[10]), 150), tmp_path / "s", workers=0, shard_size=1000, chunk_size=8, on_error="skip"
        )
    with pytest.warns(ResumeWarning, match="resuming at row"):
        out = stoker.convert.dataset(
            _FailAt(Samples(bad=[10]), None), tmp_path / "s", workers=0, shard_size=1000, chunk_size=8, on_error="skip"
        )
    ds = stoker.open(out)
    assert ds[:]["label"].tolist() == [i for i in range(200) if i != 10]
    assert ds.metadata["skipped_indices"] == [10]


class _FailAt(torch.utils.data.Dataset):
    """Interrupted at one index, as by Ctrl-C (KeyboardInterrupt is not caught per sample)."""

    def __init__(self, inner, at):
        self.inner, self.at = inner, at

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        if i == self.at:
            raise KeyboardInterrupt  # not caught per sample: stops the conversion
        return self.inner[i]


def test_schemas_that_disagree_name_the_index_and_field(tmp_path):
    class Shapes(Samples):
        def __getitem__(self, i):
            s = super().__getitem__(i)
            if i == 77:
                s["image"] = torch.zeros(3, 3, dtype=torch.uint8)
            return s

    with pytest.raises(SchemaError, match=r"dataset\[77\] field 'image' is uint8 of shape \(3, 3\)") as info:
        stoker.convert.dataset(Shapes(), tmp_path / "s", workers=2)
    assert (info.value.row, info.value.column) == (77, "image")

    class Missing(Samples):
        def __getitem__(self, i):
            s = super().__getitem__(i)
            if i == 120:
                del s["name"]
            return s

    with pytest.raises(SchemaError, match=r"dataset\[120\] has no field 'name'"):
        stoker.convert.dataset(Missing(), tmp_path / "m", workers=0, chunk_size=50)

    class FloatLabel(Samples):
        def __getitem__(self, i):
            s = super().__getitem__(i)
            s["label"] = 0.5 if i == 130 else i
            return s

    with pytest.raises(SchemaError, match=r"dataset\[130\] field 'label' is a float64 number"):
        stoker.convert.dataset(FloatLabel(), tmp_path / "f", workers=0, chunk_size=64)


def test_unstorable_value_names_the_index(tmp_path):
    class Objects(Samples):
        def __getitem__(self, i):
            return {"x": object()} if i == 5 else {"x": i}

    with pytest.raises(SchemaError, match=r"dataset\[5\].*cannot store a value of type object"):
        stoker.convert.dataset(Objects(), tmp_path / "s", workers=0)


def test_existing_store_is_refused(tmp_path):
    (tmp_path / "s").mkdir()
    with pytest.raises(StoreExistsError):
        stoker.convert.dataset(Samples(), tmp_path / "s", workers=0)


def test_many_failures_in_flight_do_not_hang(tmp_path):
    """Regression: a consumer that stops while workers write results larger than the pipe buffer."""

    class Overflow(Samples):
        def __getitem__(self, i):
            if i >= 64:
                raise RuntimeError("x" * 5000)
            return super().__getitem__(i)

    with pytest.raises(SampleError, match=r"dataset\[64\]"):
        stoker.convert.dataset(Overflow(n=2000), tmp_path / "s", workers=2, chunk_size=64)


@pytest.mark.parametrize(
    ("rows", "skipped", "start"), [(0, [], 0), (5, [], 5), (5, [0, 2], 7), (5, [7], 5), (3, [0, 1, 2, 3], 7)]
)
def test_resume_index(rows, skipped, start):
    assert resume_index(rows, skipped) == start


class _Shifted(Samples):
    """Samples of the same type and length with other content."""

    def __getitem__(self, i):
        row = super().__getitem__(i)
        row["label"] = i + 1000
        return row


class _Noisy(Samples):
    """Samples with random content (augmentation): not fingerprinted, still resumable."""

    def __getitem__(self, i):
        row = super().__getitem__(i)
        row["score"] = np.float32(np.random.random())
        return row


def test_resume_refuses_another_datasets_shards_and_overwrite_starts_over(tmp_path):
    """Issue 15 item 10: same type, length and fields, other content: refused, never mixed."""
    with pytest.raises(KeyboardInterrupt):
        stoker.convert.dataset(_FailAt(Samples(), 150), tmp_path / "s", workers=0, shard_size=1000)
    with pytest.raises(stoker.errors.ConfigError, match=r"another dataset's conversion.*overwrite=True"):
        stoker.convert.dataset(_FailAt(_Shifted(), None), tmp_path / "s", workers=0, shard_size=1000)
    out = stoker.convert.dataset(_FailAt(_Shifted(), None), tmp_path / "s", workers=0, overwrite=True)
    assert out.report["resumed_at"] == 0
    assert stoker.open(out)[:]["label"].tolist() == [i + 1000 for i in range(200)]


def test_random_samples_still_resume(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        stoker.convert.dataset(_FailAt(_Noisy(), 150), tmp_path / "s", workers=0, shard_size=1000)
    with pytest.warns(ResumeWarning):
        out = stoker.convert.dataset(_FailAt(_Noisy(), None), tmp_path / "s", workers=0, shard_size=1000)
    assert out.report["resumed_at"] > 0 and stoker.open(out)[:]["label"].tolist() == list(range(200))


class _PidLog(Samples):
    """Samples that append ``pid index`` to ``pids`` on every ``__getitem__`` (from any process)."""

    def __init__(self, pids, bad=()):
        super().__init__(bad=bad)
        self.pids = pids

    def __getitem__(self, i):
        with open(self.pids, "a") as f:
            f.write(f"{os.getpid()} {i}\n")
        return super().__getitem__(i)


@pytest.mark.parametrize("resume", [False, True])
def test_with_workers_the_parent_never_calls_getitem(tmp_path, resume):
    """Item 10 follow-up: the fingerprint is read in a worker, so a file a Dataset opens lazily in
    ``__getitem__`` is never open in the parent when the workers are forked."""
    dest = tmp_path / "s"
    if resume:  # a first run that stopped at index 150 leaves finished shards: the resume reads the fingerprint too
        with pytest.raises(SampleError):
            stoker.convert.dataset(_PidLog(tmp_path / "first.txt", [150]), dest, workers=0, shard_size=1000)
    ds = _PidLog(tmp_path / "pids.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResumeWarning)
        out = stoker.convert.dataset(ds, dest, workers=2, shard_size=1000, chunk_size=16)
    calls = [line.split() for line in ds.pids.read_text().splitlines()]
    pids = {int(pid) for pid, _ in calls}
    assert os.getpid() not in pids and pids  # every call came from a worker
    assert (out.report["resumed_at"] > 0) == resume
    assert stoker.open(out)[:]["label"].tolist() == list(range(200))
