import numpy as np
import pytest
import torch
from text_samples import SENTENCES

import stoker
import stoker.convert
from stoker.errors import ConfigError, StateError
from stoker.text import Loader

TEXTS = [s for s in SENTENCES for _ in range(7)] + [f"example number {i} " * (i % 9 + 1) for i in range(300)]


def collect(loader):
    return list(loader)


def test_batches_match_reference_and_are_dynamically_padded(reference):
    loader = Loader(TEXTS[:64], batch_size=16, max_length=32, num_workers=2, bucketing=False)
    batches = collect(loader)
    assert len(batches) == 4
    for k, b in enumerate(batches):
        texts = TEXTS[16 * k : 16 * (k + 1)]
        ref = reference(
            texts, truncation=True, max_length=32, padding="longest", pad_to_multiple_of=8, return_tensors="pt"
        )
        assert torch.equal(b["input_ids"], ref["input_ids"])
        assert torch.equal(b["attention_mask"], ref["attention_mask"])
        assert b["input_ids"].dtype == torch.int64 and b["input_ids"].shape[1] % 8 == 0


def test_report_counts_real_padded_truncated_and_empty():
    with pytest.warns(UserWarning, match=r"skipped empty texts at rows 384, 385 "):
        loader = Loader(
            TEXTS + ["", "  "], batch_size=32, max_length=16, pad_to_multiple_of=1, num_workers=1, keep_empty=False
        )
    real = padded = 0
    for b in loader:
        m = b["attention_mask"]
        real += int(m.sum())
        padded += int((m == 0).sum())
    r = loader.report()
    assert (r.real_tokens, r.padded_tokens, r.examples, r.skipped_empty) == (real, padded, len(TEXTS), 2)
    lengths = stoker.text.resolve("bert-base-uncased").encode(TEXTS).ids.lengths
    assert r.truncated == int((lengths > 16).sum()) > 0


def test_labels_pairs_and_token_type_ids(tmp_path, reference):
    p = tmp_path / "pairs.jsonl"
    import json

    rows = [{"a": SENTENCES[i], "b": SENTENCES[-i - 1], "label": i % 3} for i in range(10)]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    b = next(iter(Loader(p, batch_size=10, max_length=64, text_column="a", pair_column="b", bucketing=False)))
    assert b["labels"].tolist() == [i % 3 for i in range(10)]
    ref = reference(
        [r["a"] for r in rows],
        [r["b"] for r in rows],
        truncation=True,
        max_length=64,
        padding="longest",
        pad_to_multiple_of=8,
        return_tensors="pt",
    )
    assert torch.equal(b["input_ids"], ref["input_ids"]) and torch.equal(b["token_type_ids"], ref["token_type_ids"])
    single = next(iter(Loader(TEXTS[:4], batch_size=4, token_type_ids=True)))
    assert single["token_type_ids"].shape == single["input_ids"].shape and int(single["token_type_ids"].sum()) == 0


def test_store_gives_the_same_batches_as_on_the_fly(tmp_path):
    store = stoker.convert.text(TEXTS + [""], tmp_path / "s", max_length=24)
    ds = stoker.open(store)
    assert ds.schema["input_ids"].numpy_dtype == np.uint16 and len(ds) == len(TEXTS) + 1  # the empty text kept
    fly = Loader(TEXTS + [""], batch_size=16, max_length=24, shuffle=True, seed=3)
    stored = Loader(store, batch_size=16, shuffle=True, seed=3)
    for a, b in zip(fly, stored, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["attention_mask"], b["attention_mask"])
    assert fly.report().truncated == stored.report().truncated > 0
    assert stored.report().skipped_empty == 0


def test_bucketing_cuts_padding_and_resumes(tmp_path):
    plain = Loader(TEXTS, batch_size=16, shuffle=True, bucketing=False, pad_to_multiple_of=1)
    bucketed = Loader(TEXTS, batch_size=16, shuffle=True, pad_to_multiple_of=1)
    collect(plain), collect(bucketed)
    assert bucketed.report().padded_fraction < plain.report().padded_fraction / 2
    full = [b["input_ids"] for b in Loader(TEXTS, batch_size=16, shuffle=True, seed=5)]
    first = Loader(TEXTS, batch_size=16, shuffle=True, seed=5)
    it = iter(first)
    for _ in range(5):
        next(it)
    state = first.state_dict()
    it.close()
    resumed = Loader(TEXTS, batch_size=16, shuffle=True, seed=5)
    resumed.load_state_dict(state)
    rest = [b["input_ids"] for b in resumed]
    assert len(rest) == len(full) - 5 and all(torch.equal(a, b) for a, b in zip(rest, full[5:]))
    other = Loader(TEXTS[:-1], batch_size=16, shuffle=True, seed=5)
    with pytest.raises(StateError):
        other.load_state_dict(state)


def test_max_tokens_budget():
    loader = Loader(TEXTS, batch_size=None, max_tokens=256, max_length=64, shuffle=True)
    seen = 0
    for b in loader:
        assert b["input_ids"].numel() <= 256
        seen += len(b["input_ids"])
    assert seen == len(TEXTS)


def test_packing_blocks_have_no_padding_and_restart_positions():
    loader = Loader(TEXTS, batch_size=4, max_length=32, packing=True, shuffle=True)
    ids = stoker.text.resolve("bert-base-uncased").encode(TEXTS).ids
    total = 0
    for b in loader:
        assert b["input_ids"].shape[1] == 32
        starts = b["position_ids"] == 0
        assert torch.equal(starts, b["input_ids"] == 101)  # every document starts with [CLS]
        total += b["input_ids"].numel()
    assert total == (len(ids.values) // 32) * 32
    assert loader.report().padded_tokens == 0


def test_bad_options_are_named():
    with pytest.raises(ConfigError, match="unknown option"):
        Loader(TEXTS, batch_size=4, max_lenght=3)
    with pytest.raises(ConfigError, match="pad_to_multiple_of"):
        Loader(TEXTS, batch_size=4, pad_to_multiple_of=0)
    with pytest.raises(ConfigError, match="max_tokens"):
        Loader(TEXTS, batch_size=4, max_length=128, max_tokens=64)


def test_default_workers_inline_from_a_store_threads_on_the_fly(tmp_path):
    from stoker.pipeline.schedule import usable_cores

    store = stoker.convert.text(TEXTS[:50], tmp_path / "s", max_length=24)
    assert Loader(store, batch_size=8).num_workers == 0  # tiny gathers: threads only add hand-offs
    assert Loader(store, batch_size=8, num_workers=2).num_workers == 2
    assert Loader(TEXTS[:50], batch_size=8).num_workers == usable_cores()  # the tokenizer needs the cores
    inline = [b["input_ids"] for b in Loader(store, batch_size=8, shuffle=True)]
    threaded = [b["input_ids"] for b in Loader(store, batch_size=8, shuffle=True, num_workers=2)]
    assert len(inline) == len(threaded) == 7 and all(torch.equal(a, b) for a, b in zip(inline, threaded))


def test_shuffle_false_keeps_the_input_order_and_the_report_says_bucketing_is_off():
    texts = [t for t in TEXTS if len(t) < 200]
    loader = Loader(texts, batch_size=16, pad_to_multiple_of=1)  # shuffle=False, bucketing="auto"
    assert loader.report().bucketing.startswith("off")
    rows = [r for b in loader for r in b["input_ids"].tolist()]
    expected = [
        r for b in Loader(texts, batch_size=16, bucketing=False, pad_to_multiple_of=1) for r in b["input_ids"].tolist()
    ]
    assert rows == expected  # input order: predictions line up with the input
    assert "off (shuffle=False keeps the input order" in str(loader.report())
    assert loader.report().bucketing.startswith("off")
    assert Loader(texts, batch_size=16, shuffle=True).report().bucketing == "on"


def test_bucketing_true_gives_evaluation_a_fixed_sorted_order_that_resumes():
    EVAL = [t for t in TEXTS if len(t) < 200]  # no one very long line that pads its batch whatever the order
    plain = Loader(EVAL, batch_size=16, bucketing=False, pad_to_multiple_of=1)
    evaluation = Loader(EVAL, batch_size=16, pad_to_multiple_of=1, bucketing=True)  # shuffle=False
    assert evaluation.report().bucketing == "on" and plain.report().bucketing.startswith("off")
    first = [b["input_ids"] for b in evaluation]
    collect(plain)
    assert evaluation.report().padded_fraction < plain.report().padded_fraction / 2
    again = [b["input_ids"] for b in Loader(EVAL, batch_size=16, pad_to_multiple_of=1, bucketing=True)]
    assert len(first) == len(again) and all(torch.equal(a, b) for a, b in zip(first, again))  # deterministic
    assert [b["input_ids"] for b in evaluation] and all(
        torch.equal(a, b) for a, b in zip(first, (b["input_ids"] for b in evaluation))
    )  # the same order every epoch
    assert sum(len(b) for b in first) == len(EVAL)
    stopped = Loader(EVAL, batch_size=16, pad_to_multiple_of=1, bucketing=True)
    it = iter(stopped)
    for _ in range(3):
        next(it)
    state = stopped.state_dict()
    it.close()
    resumed = Loader(EVAL, batch_size=16, pad_to_multiple_of=1, bucketing=True)
    resumed.load_state_dict(state)
    rest = [b["input_ids"] for b in resumed]
    assert len(rest) == len(first) - 3 and all(torch.equal(a, b) for a, b in zip(rest, first[3:]))


def test_options_of_plain_batches_are_refused_with_bucketing():
    for kw in ({"shuffle": True}, {"bucketing": True}):
        with pytest.raises(ConfigError, match="pass bucketing=False") as err:
            Loader(TEXTS, batch_size=16, drop_last=True, **kw)
        assert err.value.option == "drop_last"
    for kw in ({}, {"bucketing": False, "shuffle": True}):
        dropped = Loader(TEXTS, batch_size=16, drop_last=True, **kw)
        assert dropped.report().bucketing.startswith("off") and len(dropped) == len(TEXTS) // 16


def test_max_tokens_below_the_longest_row_is_refused_when_max_length_is_not_given():
    with pytest.raises(ConfigError, match=r"max_tokens=64 is below the longest example") as err:
        Loader(TEXTS, batch_size=None, max_tokens=64)
    assert err.value.option == "max_tokens"
