"""A store-backed text loader applies or refuses tokenizer= and max_length= (text/from_store.py)."""

import json

import numpy as np
import pytest
import torch
from text_samples import SENTENCES

import stoker
import stoker.convert
import stoker.text
from stoker.errors import ConfigError

TEXTS = [f"{s} {i}" for i, s in enumerate(SENTENCES * 5)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return stoker.convert.text(TEXTS, tmp_path_factory.mktemp("t") / "s", max_length=40).path


def test_a_smaller_max_length_cuts_the_store_further_like_the_tokenizer(store):
    fly = stoker.text.Loader(TEXTS, batch_size=16, max_length=12, bucketing=False)
    cut = stoker.text.Loader(store, batch_size=16, max_length=12, bucketing=False)
    pairs = list(zip(fly, cut, strict=True))
    for a, b in pairs:
        assert b["input_ids"].shape[1] <= 16  # 12, rounded up to a multiple of 8
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["attention_mask"], b["attention_mask"])
    full = stoker.text.resolve("bert-base-uncased").encode(TEXTS).ids.lengths
    assert cut.report().truncated == fly.report().truncated == int((full > 12).sum()) > 0
    ends = [row[m.bool()][-1].item() for a, b in pairs for row, m in zip(b["input_ids"], b["attention_mask"])]
    assert set(ends) == {102}  # every row still ends in [SEP]
    np.testing.assert_array_equal(cut.source.lengths(), np.minimum(full, 12))


def test_a_bucketed_store_loader_with_a_smaller_max_length_pads_to_it(store):
    loader = stoker.text.Loader(store, batch_size=8, max_length=10, pad_to_multiple_of=1, shuffle=True)
    assert max(b["input_ids"].shape[1] for b in loader) == 10


def test_the_same_values_change_nothing_and_larger_ones_are_refused(store):
    same = stoker.text.Loader(store, batch_size=8, max_length=40, tokenizer="bert-base-uncased", bucketing=False)
    plain = stoker.text.Loader(store, batch_size=8, bucketing=False)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(same, plain, strict=True))
    assert same.source.tokenizer is not None and plain.source.tokenizer is None
    for bad in (64, None):
        with pytest.raises(ConfigError, match=r"holds examples cut to max_length=40") as err:
            stoker.text.Loader(store, batch_size=8, max_length=bad)
        assert err.value.option == "max_length"


def test_another_tokenizer_is_refused_naming_the_stores(tmp_path, store):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a"]) + "\n")
    with pytest.raises(
        ConfigError, match=r"not the tokenizer the store .* was written with \('bert-base-uncased'"
    ) as err:
        stoker.text.Loader(store, batch_size=8, tokenizer=str(vocab))
    assert err.value.option == "tokenizer"
    with pytest.raises(ConfigError, match="tokenizer"):
        stoker.text.TextSource(store, tokenizer=str(vocab))


def test_a_pair_store_refuses_a_smaller_max_length(tmp_path):
    p = tmp_path / "pairs.jsonl"
    p.write_text("\n".join(json.dumps({"a": s, "b": s[::-1]}) for s in SENTENCES))
    store = stoker.convert.text(p, tmp_path / "s", text_column="a", pair_column="b", max_length=32)
    with pytest.raises(ConfigError, match="sentence pairs cut to max_length=32"):
        stoker.text.Loader(store, batch_size=4, max_length=16)
    assert len(list(stoker.text.Loader(store, batch_size=4, max_length=32))) == 3
