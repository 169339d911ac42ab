"""Long lines are cut before tokenizing, with exactly the ids of the tokenizer's own truncation
(issue 15 item 13). No timings: the work is bounded by what reaches the tokenizer."""

from __future__ import annotations

import dataclasses
import random
import threading
import warnings

import numpy as np
import pytest

import stoker
from stoker.text.long_lines import LongLineWarning
from stoker.text.tokenizer import resolve

pytestmark = pytest.mark.filterwarnings("ignore::stoker.text.long_lines.LongLineWarning")

VOCAB = resolve("bert-base-uncased").tokenizer.get_vocab()
WORDS = sorted(w for w in VOCAB if w.isalpha() and len(w) > 2)[:5000]


class Recording:
    """A ``tokenizers.Tokenizer`` stand-in that records the longest text it was given."""

    def __init__(self, inner) -> None:
        self.inner, self.longest = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode_batch_fast(self, inputs, add_special_tokens=True):
        self.longest = max([self.longest, *map(len, inputs)])
        return self.inner.encode_batch_fast(inputs, add_special_tokens=add_special_tokens)


def reference(tok, text: str) -> tuple[list[int], bool]:
    """The tokenizer's own truncation of the whole line: ids and whether it was truncated."""
    enc = tok.tokenizer.encode_batch_fast([text])[0]
    return enc.ids, bool(enc.overflowing)


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_a_line_of_megabytes_gives_the_ids_of_the_tokenizers_truncation_from_a_prefix():
    tok = resolve("bert-base-uncased", max_length=64)
    line = sentence(random.Random(0), 400_000)  # ~3 MB, one line
    assert len(line) > 2_000_000
    recording = dataclasses.replace(tok, tokenizer=Recording(tok.tokenizer))
    got = {}

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got["enc"] = recording.encode([line, "a short line"])
            got["warnings"] = caught

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=120)  # generous: before, the whole line was tokenized (seconds per MB)
    assert not worker.is_alive(), "encoding a 3 MB line with max_length=64 did not finish in 120 s"
    enc = got["enc"]
    ids, truncated = reference(tok, line)
    assert len(ids) == 64 and truncated
    np.testing.assert_array_equal(enc.ids[0], ids)
    assert enc.truncated.tolist() == [True, False]
    assert enc.cut.tolist() == [True, False]
    assert recording.tokenizer.longest <= tok.cut_at  # the tokenizer never saw the whole line
    assert [w.category for w in got["warnings"]] == [LongLineWarning]


def test_lines_up_to_the_bound_are_tokenized_whole_as_before():
    tok = resolve("bert-base-uncased", max_length=64)
    rng = random.Random(1)
    texts = [sentence(rng, k) for k in (1, 10, 100, 150)]
    texts.append(("x " * tok.cut_at)[: tok.cut_at])  # exactly at the bound
    assert max(map(len, texts)) == tok.cut_at
    recording = dataclasses.replace(tok, tokenizer=Recording(tok.tokenizer))
    enc = recording.encode(texts)
    assert enc.cut is None and recording.tokenizer.longest == tok.cut_at
    raw = tok.tokenizer.encode_batch_fast(texts)
    for row, e in enumerate(raw):
        assert enc.ids[row].tobytes() == np.asarray(e.ids, dtype=tok.id_dtype).tobytes()


def _adversarial(rng: random.Random) -> list[str]:
    long_word = "pneumonoultramicroscopicsilicovolcanoconiosis" * 3  # over WordPiece's 100 chars: [UNK]
    lines = [
        " ".join(long_word if rng.random() < 0.3 else rng.choice(WORDS) for _ in range(900)),
        "x" * 30_000,  # one word, no space at all: tokenized whole
        "y" * 30_000 + " " + sentence(rng, 500),  # a giant first word, then words
        "a" + " " * 20_000 + sentence(rng, 300),  # a run of spaces first
        " ".join(["café naïve résumé Ÿ ÅNGSTRÖM e\u0301te\u0301"] * 400),  # accents, combining marks
        " ".join(["İstanbul ΣΟΦΊΑ straße ﬁnal"] * 400),  # lowercasing that changes lengths
        "中文字符没有空格" * 2000 + " end",  # CJK: every char a word for BERT, no ASCII space to cut at
        ("word\u00a0" * 3000) + sentence(rng, 200),  # NBSP separators, not cut points
        "\t".join(rng.choice(WORDS) for _ in range(3000)),  # tabs only
        " ".join(["[MASK]", "hello", "[SEP]x", "..."] * 800),  # special tokens and punctuation
        "".join(rng.choice("ab .,;é\u0301\x00\t 中") for _ in range(40_000)),  # noise
        " ".join(rng.choice(["!", "?", "...", "(", ")", "a.b", "1,000"]) for _ in range(8000)),
    ]
    return lines


@pytest.mark.parametrize("max_length", [2, 8, 64, 128])
def test_adversarial_lines_give_exactly_the_tokenizers_own_truncation(max_length):
    tok = resolve("bert-base-uncased", max_length=max_length)
    lines = _adversarial(random.Random(max_length))
    assert all(len(line) > tok.cut_at for line in lines)
    enc = tok.encode(lines)
    for row, line in enumerate(lines):
        ids, truncated = reference(tok, line)
        np.testing.assert_array_equal(enc.ids[row], ids, err_msg=f"line {row}")
        assert bool(enc.truncated[row]) == truncated, f"line {row}"
    assert enc.cut[1] == False  # noqa: E712 - no space to cut at: tokenized whole


@pytest.mark.parametrize("cut_at", [1, 5, 17, 60])
def test_any_cut_point_gives_the_same_ids(cut_at):
    """The equality does not rest on the bound: with tiny bounds every line is cut, at odd places."""
    rng = random.Random(cut_at)
    alphabet = ["a", "bc", "é", "e\u0301", " ", "  ", "\t", ".", "中", "\xa0", "İ", "[MASK]", "\x00", "##", "Σ"]
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(5, 400))) for _ in range(300)]
    lines += [sentence(rng, rng.randint(1, 80)) for _ in range(100)]
    for max_length in (3, 16):
        tok = dataclasses.replace(resolve("bert-base-uncased", max_length=max_length), cut_at=cut_at)
        enc = tok.encode(lines)
        assert enc.cut is not None and enc.cut.any()
        for row, line in enumerate(lines):
            ids, truncated = reference(tok, line)
            np.testing.assert_array_equal(enc.ids[row], ids, err_msg=repr(line))
            assert bool(enc.truncated[row]) == truncated


def _byte_level_bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<pad>"], show_progress=False)
    rng = random.Random(5)
    tok.train_from_iterator([sentence(rng, 30) for _ in range(300)], trainer)
    return tok


def test_a_byte_level_bpe_tokenizer_is_cut_exactly_too():
    base = resolve(_byte_level_bpe(), max_length=16)
    assert base.cut_at is not None
    rng = random.Random(9)
    alphabet = ["ab", "c", " ", "  ", "é", "'s", "!", "12", "\n", "\t"]
    lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(5, 300))) for _ in range(300)]
    for cut_at in (3, 40):
        tok = dataclasses.replace(base, cut_at=cut_at)
        enc = tok.encode(lines)
        assert enc.cut.any()
        for row, line in enumerate(lines):
            ids, truncated = reference(tok, line)
            np.testing.assert_array_equal(enc.ids[row], ids, err_msg=repr(line))
            assert bool(enc.truncated[row]) == truncated


def test_unsuitable_tokenizers_are_never_cut_and_pairs_are_cut_with_the_same_ids():
    from tokenizers import Tokenizer, models

    assert resolve("bert-base-uncased").cut_at is None  # no max_length: nothing to cut to
    whole = Tokenizer(models.WordLevel({"<pad>": 0, "[UNK]": 1}, unk_token="[UNK]"))  # no pre-tokenizer
    assert resolve(whole, max_length=8).cut_at is None
    tok = resolve("bert-base-uncased", max_length=8)
    long = sentence(random.Random(2), 200)
    assert len(long) > tok.cut_at
    enc = tok.encode([long], [long])  # each text of the pair is cut on its own (issue 36 item 8)
    assert enc.cut is not None and enc.cut.tolist() == [True]
    assert enc.ids.values.tolist() == tok.tokenizer.encode_batch_fast([(long, long)])[0].ids


def test_the_loader_report_and_the_store_metadata_count_cut_lines(tmp_path):
    rng = random.Random(4)
    texts = [sentence(rng, 5) for _ in range(9)] + [sentence(rng, 20_000)]
    with pytest.warns(LongLineWarning, match="count them as cut_lines"):
        loader = stoker.text.Loader(texts, batch_size=5, max_length=32, shuffle=False)
        for _ in loader:
            pass
    report = loader.report()
    assert report.cut_lines == 1 and report.truncated == 1 and "1 long lines cut" in str(report)
    with pytest.warns(LongLineWarning):
        result = stoker.convert.text(texts, tmp_path / "store", max_length=32)
    assert result.report["cut_lines"] == 1
    assert stoker.open(tmp_path / "store").metadata["stoker.text"]["cut_lines"] == 1


def test_the_warning_gives_no_count_that_the_epoch_outgrows(tmp_path):
    """The warning is raised once, at the first long line: it read "1 line(s) longer than ..." while the
    epoch cut 3. It names no count now; report() has the epoch's."""
    rng = random.Random(5)
    texts = [sentence(rng, 20_000) if i % 5 == 0 else sentence(rng, 5) for i in range(15)]
    with pytest.warns(LongLineWarning) as got:
        loader = stoker.text.Loader(texts, batch_size=5, max_length=32, shuffle=False)
        for _ in loader:
            pass
    assert loader.report().cut_lines == 3
    (message,) = [str(w.message) for w in got if w.category is LongLineWarning]
    assert "line(s)" not in message and message.startswith("lines longer than"), message


def test_the_bundled_vocabularies_longest_entry_is_the_files_own():
    """resolve() takes the bundled vocabularies' longest entry from a table, not from the file: it must match."""
    from importlib import resources

    from stoker.text.long_lines import cut_bound, longest_entry
    from stoker.text.tokenizer import BUNDLED, BUNDLED_LONGEST

    assert set(BUNDLED_LONGEST) == set(BUNDLED)
    for name, file in BUNDLED.items():
        with resources.as_file(resources.files("stoker.text") / "data" / file) as path:
            assert BUNDLED_LONGEST[name] == longest_entry(path)
        tok = resolve(name, max_length=128)
        assert tok.cut_at == cut_bound(tok.tokenizer, 128)  # as from the tokenizer's own vocabulary
