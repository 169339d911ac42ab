"""The token cache of on-the-fly text: one tokenizer pass, ids kept, gathered in later epochs."""

import numpy as np
import pytest
import torch
from text_samples import SENTENCES

import stoker
import stoker.text
from stoker.errors import ConfigError
from stoker.text import TextSource
from stoker.text.cache import TokenCache, encode_rows
from stoker.text.inputs import TextColumns, read_table
from stoker.text.tokenizer import resolve

TEXTS = [f"{s} {i}" for i, s in enumerate(SENTENCES * 20)]
ROWS = {"text": TEXTS, "label": list(range(len(TEXTS)))}  # labels = row numbers


def same_encoding(a, b):
    assert np.array_equal(a.ids.values, b.ids.values) and np.array_equal(a.ids.offsets, b.ids.offsets)
    assert a.ids.values.dtype == b.ids.values.dtype
    if b.type_ids is None:
        assert a.type_ids is None
    else:
        assert np.array_equal(a.type_ids.values, b.type_ids.values)
    assert np.array_equal(a.truncated, b.truncated)


@pytest.mark.parametrize("pairs", [False, True])
def test_ids_from_the_cache_equal_a_fresh_tokenization(pairs):
    data = {"text": TEXTS, "pair": TEXTS[::-1]} if pairs else TEXTS
    table = read_table(data, TextColumns(pair="pair") if pairs else TextColumns())
    tok = resolve("bert-base-uncased", max_length=24)
    cache = TokenCache(table, tok)
    lengths = cache.all()
    assert cache.complete
    idx = np.random.default_rng(0).permutation(len(TEXTS))[:97]
    fresh = encode_rows(table, tok, idx)
    same_encoding(cache.fetch(idx), fresh)
    assert np.array_equal(lengths[idx], fresh.ids.lengths)
    assert fresh.truncated.any()  # the long line was cut, and the cache says so too


def test_rows_read_before_the_pass_are_cached_once_and_served_again():
    table = read_table(TEXTS, TextColumns())
    tok = resolve("bert-base-uncased", max_length=32)
    cache = TokenCache(table, tok)
    first = cache.fetch(np.array([5, 3, 5, 9]))  # a repeated row, tokenized by the reader
    assert not cache.complete
    cache.all()
    same_encoding(cache.fetch(np.array([5, 3, 5, 9])), first)
    same_encoding(cache.fetch(np.arange(len(TEXTS))), encode_rows(table, tok, np.arange(len(TEXTS))))


def test_a_later_epoch_gathers_from_the_cache_without_the_tokenizer():
    loader = stoker.text.Loader(ROWS, batch_size=8, max_length=32, shuffle=True, seed=4)
    first = [b["input_ids"] for b in loader]
    rows = loader.source.rows
    assert rows.cache.complete
    tok = rows.tokenizer
    real = tok.tokenizer

    class NoTokenizing:
        def __getattr__(self, name):
            if name.startswith("encode"):
                raise AssertionError("tokenized again")
            return getattr(real, name)

    object.__setattr__(tok, "tokenizer", NoTokenizing())
    loader.set_epoch(0)
    again = [b["input_ids"] for b in loader]
    assert len(again) == len(first) and all(torch.equal(a, b) for a, b in zip(first, again))


def test_a_changed_tokenizer_empties_the_cache_of_an_unbucketed_loader():
    loader = stoker.text.Loader(ROWS, batch_size=8, max_length=32)
    before = [b["input_ids"] for b in loader]
    assert max(b.shape[1] for b in before) == 32 and loader.source.rows.cache.complete
    loader.source.tokenizer.tokenizer.enable_truncation(12)  # changes the ids of long rows
    after = [b["input_ids"] for b in loader]
    assert max(b.shape[1] for b in after) == 16  # 12, padded to a multiple of 8: tokenized again
    fresh = stoker.text.Loader(ROWS, batch_size=8, max_length=32)
    fresh.source.tokenizer.tokenizer.enable_truncation(12)
    assert all(torch.equal(a, b) for a, b in zip(after, (b["input_ids"] for b in fresh)))


def test_a_changed_tokenizer_is_refused_once_batches_were_ordered_by_its_lengths():
    loader = stoker.text.Loader(ROWS, batch_size=8, max_length=32, shuffle=True)
    next(iter(loader))
    loader.source.tokenizer.tokenizer.enable_truncation(12)
    with pytest.raises(ConfigError, match="tokenizer") as err:
        next(iter(loader))
    assert err.value.option == "tokenizer"


def test_a_different_max_length_gives_its_own_cache():
    short = stoker.text.Loader(ROWS, batch_size=8, max_length=16, shuffle=True, seed=1)
    long = stoker.text.Loader(ROWS, batch_size=8, max_length=64, shuffle=True, seed=1)
    assert short.source.rows.cache is not long.source.rows.cache
    assert max(b["input_ids"].shape[1] for b in short) == 16
    assert max(b["input_ids"].shape[1] for b in long) == 64


def test_max_tokens_knows_its_length_from_one_pass_and_reads_the_cache():
    loader = stoker.text.Loader(ROWS, batch_size=None, max_tokens=256, max_length=64, shuffle=True)
    assert loader.source.rows.cache.complete  # the budget cuts needed every length: tokenized once, kept
    assert len(loader) == len(list(loader)) > 1


def test_source_lengths_keep_their_ids_for_the_composed_loader():
    source = TextSource(ROWS, max_length=32)
    source.lengths()
    assert source.rows.cache.complete


@pytest.mark.parametrize("bucketing", [True, False])
def test_worker_processes_give_the_batches_of_threads(bucketing):
    options = dict(batch_size=8, max_length=32, shuffle=True, seed=3, bucketing=bucketing)
    threads = [b["input_ids"] for b in stoker.text.Loader(ROWS, **options)]
    loader = stoker.text.Loader(ROWS, engine="processes", num_workers=2, **options)
    for epoch in range(2):  # the first while the parent's cache fills, the second from it
        got = [b["input_ids"] for b in loader]
        if epoch == 0:
            assert len(got) == len(threads) and all(torch.equal(a, b) for a, b in zip(got, threads))
    assert loader.source.rows.cache.complete == bucketing
