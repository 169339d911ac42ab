"""No example disappears silently (issue 32): an empty text is a row by default ([CLS] [SEP], padded),
so predictions made with shuffle=False line up with the file; skipping is asked for and warned of."""

from __future__ import annotations

import pytest
import torch

from stoker.text import Loader
from stoker.text.inputs import TextColumns, read_table


def test_an_empty_tsv_text_is_kept_as_an_empty_sequence(tmp_path):
    path = tmp_path / "labelled.tsv"
    path.write_text("label\ttext\n1\thello world\n4\t\n2\tgood bye\n")
    loader = Loader(path, batch_size=8, bucketing=False, pad_to_multiple_of=1)
    (batch,) = list(loader)
    assert batch["labels"].tolist() == [1, 4, 2]
    assert batch["input_ids"][1, :2].tolist() == [101, 102]  # [CLS] [SEP]
    assert batch["attention_mask"][1].tolist() == [1, 1, 0, 0]
    assert loader.report().skipped_empty == 0


def test_skipping_empty_texts_is_asked_for_and_names_the_lines(tmp_path):
    path = tmp_path / "labelled.tsv"
    path.write_text("label\ttext\n1\thello world\n4\t\n2\tgood bye\n3\t  \n")
    with pytest.warns(UserWarning, match=r"labelled\.tsv: keep_empty=False skipped empty texts at lines 3, 5 "):
        loader = Loader(path, batch_size=8, bucketing=False, keep_empty=False)
    assert torch.cat([b["labels"] for b in loader]).tolist() == [1, 2]
    assert loader.report().skipped_empty == 2


def test_a_row_of_empty_fields_is_blank_not_a_class_named_empty(tmp_path):
    """Keeping empty texts must not turn ``\\t`` (no text, no label) into an example of a class ""."""
    import stoker

    path = tmp_path / "c.tsv"
    path.write_text("label\ttext\npos\tgood\n\t\n4\t\nneg\tbad\n".replace("4\t", "neg\t"))
    loader = stoker.text.Loader(path, batch_size=8, shuffle=False)
    assert loader.label_names == ("neg", "pos")
    batch = next(iter(loader))
    assert batch["labels"].tolist() == [1, 0, 0]  # the empty text with a label is kept; the empty row is not
    assert loader.report().skipped_empty == 1


def test_a_store_converted_with_the_defaults_has_the_loaders_rows(tmp_path):
    """stoker.convert.text skipped empty texts by default, so a store had fewer rows than the loader read."""
    import numpy as np

    import stoker

    path = tmp_path / "labelled.tsv"
    path.write_text("label\ttext\n1\thello world\n4\t\n2\tgood bye\n3\t  \n")
    result = stoker.convert.text(path, tmp_path / "s", max_length=16, progress=False)
    ds = stoker.open(result)
    assert (result.rows, result.skipped, len(ds)) == (4, 0, 4)
    assert ds.gather(np.arange(4), ["line"])["line"].tolist() == [2, 3, 4, 5]
    fly = Loader(path, batch_size=8, bucketing=False, max_length=16)
    stored = Loader(result.path, batch_size=8, bucketing=False)
    for a, b in zip(fly, stored, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    with pytest.warns(UserWarning, match=r"labelled\.tsv: keep_empty=False skipped empty texts at lines 3, 5 "):
        skipped = stoker.convert.text(path, tmp_path / "t", keep_empty=False, progress=False)
    assert (skipped.rows, skipped.skipped) == (2, 2)


@pytest.mark.parametrize("keep_empty", [True, False])
def test_a_dict_with_number_labels_keeps_or_skips_its_empty_texts_as_asked(keep_empty):
    data = {"text": ["a b", "  ", "c", ""], "label": [7, 8, 9, 10]}
    if keep_empty:
        table = read_table(data, TextColumns(keep_empty=True))
        assert table.texts == data["text"] and table.labels.tolist() == [7, 8, 9, 10]
        return
    with pytest.warns(UserWarning, match=r"keep_empty=False skipped empty texts at rows 1, 3 "):
        table = read_table(data, TextColumns(keep_empty=False))
    assert table.texts == ["a b", "c"] and table.labels.tolist() == [7, 9] and table.lines.tolist() == [0, 2]
    assert table.skipped_empty == 2
