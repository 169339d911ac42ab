import json

import numpy as np
import pytest
import torch

import stoker
import stoker.convert
import stoker.text
from stoker.text.packing import PackedBatches

TEXTS = [f"document {i} says " + "word " * (i % 13 + 1) for i in range(120)]


def test_public_names():
    assert sorted(stoker.text.__all__) == [
        "LengthBuckets",
        "Loader",
        "PackedBatches",
        "TextColumns",
        "TextConfig",
        "TextReport",
        "TextSource",
        "TextTokenizer",
        "resolve",
    ]
    for name in stoker.text.__all__:
        assert getattr(stoker.text, name) is not None
    assert "text" in stoker.convert.__all__
    assert "InputError" in stoker.errors.__all__ and issubclass(stoker.errors.InputError, ValueError)


def test_packing_from_a_store_equals_packing_on_the_fly_and_resumes(tmp_path):
    store = stoker.convert.text(TEXTS, tmp_path / "s", max_length=None)
    fly = [
        b["input_ids"]
        for b in stoker.text.Loader(TEXTS, batch_size=3, max_length=16, packing=True, shuffle=True, seed=2)
    ]
    stored = [
        b["input_ids"]
        for b in stoker.text.Loader(store, batch_size=3, max_length=16, packing=True, shuffle=True, seed=2)
    ]
    assert len(fly) == len(stored) > 3 and all(torch.equal(a, b) for a, b in zip(fly, stored))
    loader = stoker.text.Loader(store, batch_size=3, max_length=16, packing=True, shuffle=True, seed=2)
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    it.close()
    again = stoker.text.Loader(store, batch_size=3, max_length=16, packing=True, shuffle=True, seed=2)
    again.load_state_dict(state)
    assert all(torch.equal(a["input_ids"], b) for a, b in zip(again, stored[2:]))


@pytest.mark.parametrize("world", [1, 2, 3])
def test_packed_blocks_split_evenly_over_ranks(world):
    lengths = np.random.default_rng(0).integers(3, 60, size=200)
    samplers = [PackedBatches(lengths, 32, 4, True, 0, r, world) for r in range(world)]
    assert len({len(s) for s in samplers}) == 1
    blocks = np.concatenate([b[:, 1] for s in samplers for b in s.batches(1)])
    assert len(blocks) == len(set(blocks.tolist())) == (lengths.sum() // 32) // world * world


def test_pairs_through_a_store(tmp_path):
    p = tmp_path / "nli.jsonl"
    p.write_text(
        "\n".join(
            json.dumps({"premise": f"a man {i} sleeps", "hypothesis": "someone rests", "label": ["yes", "no"][i % 2]})
            for i in range(20)
        )
    )
    store = stoker.convert.text(p, tmp_path / "s", text_column="premise", pair_column="hypothesis", max_length=32)
    fly = next(
        iter(stoker.text.Loader(p, batch_size=20, text_column="premise", pair_column="hypothesis", max_length=32))
    )
    got = next(iter(stoker.text.Loader(store, batch_size=20)))
    for key in ("input_ids", "attention_mask", "token_type_ids", "labels"):
        assert torch.equal(fly[key], got[key]), key
    assert stoker.open(store).metadata["stoker.text"]["label_names"] == ["no", "yes"]  # sorted, as ImageFolder


def test_report_text():
    with pytest.warns(UserWarning, match="skipped empty texts"):
        loader = stoker.text.Loader(TEXTS + [""], batch_size=8, max_length=8, keep_empty=False)
    list(loader)
    text = str(loader.report())
    assert "15 batches, 120 examples" in text and "1 empty lines skipped" in text and "truncated" in text
