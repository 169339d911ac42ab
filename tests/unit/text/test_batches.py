"""PaddedText.read on a chunk of several batches: each batch as if it were read alone."""

import numpy as np
import pytest
import torch
from text_samples import SENTENCES

import stoker
import stoker.convert
from stoker.text.batches import PaddedText, StoredRows
from stoker.text.report import TALLY_KEY, BatchTally

TEXTS = [f"{s} {i}" for i, s in enumerate(SENTENCES * 5)]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    labels = [i % 4 for i in range(len(TEXTS))]
    path = stoker.convert.text({"text": TEXTS, "label": labels}, tmp_path_factory.mktemp("t") / "s", max_length=20)
    return StoredRows(stoker.open(path))


CHUNK = [np.array([5, 0, 17, 3]), np.array([], dtype=np.int64), np.array([10]), np.array([59, 11, 2, 40, 41, 7])]


@pytest.mark.parametrize("widen_on_device", [False, True])
@pytest.mark.parametrize("token_type_ids", [False, True])
def test_a_chunk_reads_like_its_batches_one_by_one(rows, widen_on_device, token_type_ids):
    source = PaddedText(
        rows, pad_id=0, pad_to_multiple_of=8, token_type_ids=token_type_ids, widen_on_device=widen_on_device
    )
    together = source.read(CHUNK)
    assert len(together) == len(CHUNK)
    for idx, got in zip(CHUNK, together):
        alone = source.read([idx])[0] if len(idx) else None
        assert got[TALLY_KEY].examples == len(idx)
        if alone is None:
            assert got["input_ids"].shape == (0, 0) and got[TALLY_KEY] == BatchTally(0, 0, 0, 0)
            continue
        assert got.keys() == alone.keys()
        for key in got:
            if key == TALLY_KEY:
                assert got[key] == alone[key]
            else:
                assert got[key].dtype == alone[key].dtype
                np.testing.assert_array_equal(got[key], alone[key])
        assert got["input_ids"].dtype == (np.uint16 if widen_on_device else np.int64)
        assert got["attention_mask"].shape == got["input_ids"].shape and got["input_ids"].shape[1] % 8 == 0
        assert ("token_type_ids" in got) == token_type_ids
        np.testing.assert_array_equal(got["labels"], rows.labels[idx])


def test_batch_contents_and_counts(rows):
    source = PaddedText(rows, pad_id=0, pad_to_multiple_of=8, widen_on_device=True)
    got = source.read(CHUNK)
    ids = rows.store.gather(np.arange(len(rows)), ["input_ids"])["input_ids"]
    cut = rows.store.gather(np.arange(len(rows)), ["truncated"])["truncated"]
    for idx, b in zip(CHUNK, got):
        for r, i in enumerate(idx):
            n = len(ids[i])
            np.testing.assert_array_equal(b["input_ids"][r, :n], ids[i])
            assert not b["input_ids"][r, n:].any() and b["attention_mask"][r].sum() == n
        real = sum(len(ids[i]) for i in idx)
        assert got and b[TALLY_KEY] == BatchTally(len(idx), real, b["input_ids"].size - real, int(cut[idx].sum()))
    assert sum(int(cut[i]) for idx in CHUNK for i in idx) > 0  # the data has truncated rows to count
    batch = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in got[0].items()}
    out = source.finalize(batch)
    assert out["input_ids"].dtype == torch.int64 and out["attention_mask"].dtype == torch.int64 and TALLY_KEY not in out
    assert source.tally.report().real_tokens == sum(len(ids[i]) for i in CHUNK[0])
