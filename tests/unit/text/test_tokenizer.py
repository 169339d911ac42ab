import numpy as np
import pytest
from text_samples import SENTENCES

import stoker
from stoker.errors import ConfigError
from stoker.text.tokenizer import resolve, smallest_uint


@pytest.mark.parametrize("max_length", [None, 16, 128])
def test_bundled_ids_equal_bert_tokenizer_fast(reference, max_length):
    tok = resolve("bert-base-uncased", max_length=max_length)
    enc = tok.encode(SENTENCES)
    kwargs = {"truncation": True, "max_length": max_length} if max_length else {}
    expected = reference(SENTENCES, **kwargs)["input_ids"]
    assert [list(map(int, enc.ids[i])) for i in range(len(SENTENCES))] == expected
    assert enc.ids.values.dtype == np.uint16


def test_pairs_ids_and_type_ids_equal_reference(reference):
    a, b = SENTENCES[:6], SENTENCES[6:]
    enc = resolve("bert-base-uncased", max_length=24).encode(a, b)
    ref = reference(a, b, truncation=True, max_length=24)
    assert [list(map(int, enc.ids[i])) for i in range(6)] == ref["input_ids"]
    assert [list(map(int, enc.type_ids[i])) for i in range(6)] == ref["token_type_ids"]


def test_truncation_keeps_cls_and_sep_and_is_flagged():
    tok = resolve("bert-base-uncased", max_length=10)
    enc = tok.encode(SENTENCES)
    assert enc.ids.lengths.max() == 10
    for i in range(len(SENTENCES)):
        row = enc.ids[i]
        assert row[0] == 101 and row[-1] == 102
    assert enc.truncated.tolist() == [
        len(enc.ids[i]) == 10 and len(resolve("bert-base-uncased").encode([s]).ids[0]) > 10
        for i, s in enumerate(SENTENCES)
    ]


def test_every_way_to_name_a_tokenizer_gives_the_same_ids(reference, vocab_dir, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    json_path = tmp_path / "tokenizer.json"
    reference.backend_tokenizer.save(str(json_path))
    specs = [
        "bert-base-uncased",
        vocab_dir / "vocab.txt",
        str(vocab_dir),
        json_path,
        tokenizers.Tokenizer.from_file(str(json_path)),
        reference,
    ]
    ids = [resolve(s).encode(SENTENCES[:5]).ids.values.tolist() for s in specs]
    assert all(x == ids[0] for x in ids)


def test_resolve_does_not_change_the_users_tokenizer(reference):
    backend = reference.backend_tokenizer
    before = backend.to_str()
    resolve(reference, max_length=8)
    assert backend.to_str() == before


def test_no_pad_token_is_a_clear_error(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel

    tok = tokenizers.Tokenizer(WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    with pytest.raises(ConfigError, match="no pad token") as info:
        resolve(tok)
    assert info.value.option == "pad_id"
    assert resolve(tok, pad_id=2).pad_id == 2


def test_unknown_name_says_stoker_does_not_download():
    with pytest.raises(ConfigError, match="does not download"):
        resolve("roberta-large")


def test_smallest_uint():
    assert smallest_uint(256) == np.uint8
    assert smallest_uint(257) == np.uint16
    assert smallest_uint(30522) == np.uint16
    assert smallest_uint(65537) == np.int32


def test_bundled_vocab_ships_its_notice():
    from importlib import resources

    notice = (resources.files("stoker.text") / "data" / "NOTICE").read_text()
    assert "Apache License" in notice and "MIT License" in notice
    assert stoker.text.resolve("bert-base-uncased").vocab_size == 30522


def test_the_longest_entry_read_from_vocab_txt_gives_the_bound_the_vocabulary_gives(tmp_path):
    """resolve() reads a vocab.txt's longest entry from the file (no dict of the vocabulary): the
    same cut bound as the tokenizer's own vocabulary gives, for the bundled file and another."""
    from stoker.text.long_lines import cut_bound

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n##é\nextraordinarilylongwordpiece\n")
    for spec in ("bert-base-uncased", vocab):
        tok = resolve(spec, max_length=128)
        assert tok.cut_at == cut_bound(tok.tokenizer, 128)  # without longest: from get_vocab
    assert resolve(vocab, max_length=128).cut_at == 129 * (len("extraordinarilylongwordpiece") + 1)
