"""TextSource composed with the core loader, and the options stoker.text.Loader hands it."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from text_samples import SENTENCES

import stoker
import stoker.convert
import stoker.text
from stoker.errors import ConfigError
from stoker.pipeline.sampler import FixedBatches, Sampler
from stoker.text import LengthBuckets, TextColumns, TextSource

TEXTS = [f"{s} {i}" for i, s in enumerate(SENTENCES * 20)]
ROWS = {"text": TEXTS, "label": list(range(len(TEXTS)))}  # labels = row numbers: batches show which rows they hold


def tensors(loader):
    return [{k: v for k, v in b.items()} for b in loader]


def assert_same_batches(a, b):
    assert len(a) == len(b) > 1
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        assert all(torch.equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("from_store", [False, True])
def test_core_loader_with_text_source_and_length_buckets_equals_the_text_loader(tmp_path, from_store):
    data = stoker.convert.text(ROWS, tmp_path / "s", max_length=32) if from_store else ROWS
    text = stoker.text.Loader(data, batch_size=16, max_length=32, shuffle=True, seed=5, bucket_window=3)
    source = TextSource(data, max_length=32)
    buckets = LengthBuckets(source.lengths(), 16, shuffle=True, seed=5, window=3, round_to=source.pad_to_multiple_of)
    composed = stoker.Loader(source, batch_sampler=buckets)
    assert_same_batches(tensors(text), tensors(composed))
    assert replace(text.report(), bucketing="") == composed.report() and text.report().real_tokens > 0
    assert len(text) == len(composed) and text.state_dict() == composed.state_dict()


def test_core_loader_with_text_source_and_plain_batches_equals_the_text_loader_without_bucketing():
    text = stoker.text.Loader(ROWS, batch_size=12, max_length=24, shuffle=True, seed=2, bucketing=False, drop_last=True)
    composed = stoker.Loader(TextSource(ROWS, max_length=24), 12, shuffle=True, seed=2, drop_last=True)
    assert isinstance(text.batch_sampler, FixedBatches)
    assert_same_batches(tensors(text), tensors(composed))
    assert len(text) == len(TEXTS) // 12


def test_bucket_window_reaches_the_sampler():
    loader = stoker.text.Loader(ROWS, batch_size=8, shuffle=True, seed=1, bucket_window=3)
    assert isinstance(loader.batch_sampler, LengthBuckets) and loader.batch_sampler.window == 3
    lengths = TextSource(ROWS).lengths()
    want = LengthBuckets(lengths, 8, shuffle=True, seed=1, window=3, round_to=8).epoch_batches(0)
    got = [b["labels"].numpy() for b in loader]
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    other = [b["labels"].numpy() for b in stoker.text.Loader(ROWS, batch_size=8, shuffle=True, seed=1)]
    assert any(not np.array_equal(a, b) for a, b in zip(got, other))  # the default window (100) batches otherwise


def test_block_shuffle_without_bucketing_takes_the_core_block_size_and_window():
    loader = stoker.text.Loader(ROWS, batch_size=10, shuffle="block", bucketing=False, block_size=16, window=2, seed=4)
    sampler = loader.batch_sampler
    assert isinstance(sampler, FixedBatches)
    assert (sampler.sampler.order, sampler.sampler.block_size, sampler.sampler.window) == ("block", 16, 2)
    rows = np.concatenate([b["labels"].numpy() for b in loader])
    np.testing.assert_array_equal(rows, Sampler(len(TEXTS), "block", 4, 16, 2).indices(0))


def test_block_order_options_are_refused_where_a_text_sampler_orders_the_rows():
    with pytest.raises(ConfigError, match="bucket_window") as err:
        stoker.text.Loader(TEXTS, batch_size=8, shuffle=True, window=50)
    assert err.value.option == "window"
    with pytest.raises(ConfigError, match="block_size"):
        stoker.text.Loader(TEXTS, batch_size=8, max_length=16, packing=True, block_size=64)


def test_unknown_and_store_only_options_are_refused_listing_the_valid_ones():
    for bad in ("max_lenght", "columns", "pad_value"):
        with pytest.raises(ConfigError, match="unknown option") as err:
            stoker.text.Loader(TEXTS, batch_size=4, **{bad: 1})
        assert "bucket_window" in str(err.value) and "num_workers" in str(err.value) and err.value.option == bad


def test_widening_follows_where_batches_land():
    source = TextSource(TEXTS[:40], max_length=32)
    assert source.sends_narrow_ids  # nothing delivered yet
    batches = list(stoker.Loader(source, 8, num_workers=0))
    assert all(b["input_ids"].dtype == torch.int64 and b["attention_mask"].dtype == torch.int64 for b in batches)
    assert not source.sends_narrow_ids  # they land on the CPU: the reads after the first pad into int64
    assert source.read([np.arange(4)])[0]["input_ids"].dtype == np.int64
    pinned = TextSource(TEXTS[:40], max_length=32, widen_on_device=True)
    again = list(stoker.Loader(pinned, 8, num_workers=0))
    assert pinned.sends_narrow_ids and pinned.read([np.arange(4)])[0]["input_ids"].dtype == np.uint16
    assert_same_batches(batches, again)


def test_columns_and_pairs_through_text_source(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\tlabel\n" + "".join(f"{s}\t{t}\t{i % 2}\n" for i, (s, t) in enumerate(zip(TEXTS, TEXTS[1:]))))
    source = TextSource(path, max_length=48, columns=TextColumns(text="a", pair="b"))
    text = stoker.text.Loader(path, batch_size=16, max_length=48, text_column="a", pair_column="b", bucketing=False)
    assert_same_batches(tensors(text), tensors(stoker.Loader(source, 16)))
    assert source.tokenizer is not None and "token_type_ids" in next(iter(stoker.Loader(source, 4)))


def test_a_row_out_of_range_is_named():
    with pytest.raises(IndexError, match="row 999 "):
        TextSource(TEXTS[:40]).read([np.array([0, 999])])


def test_drop_last_with_bucketing_is_refused_not_ignored():
    import stoker
    from stoker.errors import ConfigError

    with pytest.raises(ConfigError, match="drop_last"):
        stoker.text.Loader(["a b", "c"] * 10, batch_size=3, shuffle=True, drop_last=True)
    plain = stoker.text.Loader(["a b", "c"] * 10, batch_size=3, shuffle=True, drop_last=True, bucketing=False)
    assert len(plain) == 6 and all(len(b["input_ids"]) == 3 for b in plain)


def test_rows_trace_back_to_their_line_on_the_fly_and_from_a_store(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("label\ttext\npos\tgood\n\t\nneg\tbad\nneg\tugly\n")
    store = stoker.convert.text(path, tmp_path / "s", max_length=16)
    ds = stoker.open(store)
    assert {"labels", "line"} <= set(ds.schema) and "label" not in ds.schema  # the batches' name
    assert ds.gather(np.arange(3), ["line"])["line"].tolist() == [2, 4, 5]
    # line 3 is a row of empty fields: blank, not an example with a class "" (on the fly and in the store alike)
    for data, last in ((path, 2), (store, 2)):
        source = TextSource(data)
        assert source.describe(last) == f"{path}, line 5"
        with pytest.raises(IndexError, match=f"row {last + 1} "):
            source.describe(last + 1)
    batch = next(iter(stoker.text.Loader(store, batch_size=3, bucketing=False)))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}  # line, length, truncated stay in the store
    assert batch["labels"].tolist() == [1, 0, 0]
    assert TextSource(["a", "b"]).describe(1) == "row 1 of a list of 2 examples"
