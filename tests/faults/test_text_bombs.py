"""Text inputs within bounded memory (issue 36 item 8): pairs cut like single texts, no abort without max_length."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.errors import InputError
from stoker.text.long_lines import MAX_WHOLE_CHARS
from stoker.text.tokenizer import resolve

pytestmark = pytest.mark.faults

WORDS = "the quick brown fox jumps over the lazy dog and runs far away "


def test_a_long_text_of_a_pair_is_cut_before_tokenizing_with_the_same_ids():
    tok = resolve("bert-base-uncased", max_length=32)
    # over cut_at (1,024 characters here), small enough that the whole reference stays cheap: a pair of two long
    # texts tokenized whole makes every overflow of one times every overflow of the other (a 50 MB field: 5.8 GB)
    long = WORDS * 60
    texts, pairs = ["a question about foxes", long, long], [long, "a short answer", long]
    got = tok.encode(texts, pairs)
    whole = tok.tokenizer.encode_batch_fast(list(zip(texts, pairs)))
    for i, enc in enumerate(whole):
        a, b = got.ids.offsets[i], got.ids.offsets[i + 1]
        np.testing.assert_array_equal(got.ids.values[a:b], enc.ids)
        np.testing.assert_array_equal(got.type_ids.values[a:b], enc.type_ids)
    assert got.cut is not None and got.cut.tolist() == [True, True, True]
    assert got.truncated.tolist() == [True, True, True]
    short = tok.encode(["a question"], ["an answer"])
    assert short.cut is not None and not short.cut.any()


def test_a_huge_text_without_max_length_is_a_clear_error_not_an_abort():
    tok = resolve("bert-base-uncased", max_length=None)
    huge = "x" * (MAX_WHOLE_CHARS + 1)
    with pytest.raises(InputError, match="pass max_length= to cut it"):
        tok.encode(["fine", huge])
    with pytest.raises(InputError, match="text 0 of this batch"):
        tok.encode(["fine"], [huge])
    assert len(tok.encode(["x" * 1000]).ids.values) > 0  # under the bound: tokenized whole
