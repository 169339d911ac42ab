"""JSONL with label_column='auto': labels that start after the first line are refused, not dropped."""

from __future__ import annotations

import pytest

from stoker.errors import InputError
from stoker.text.inputs import TextColumns, read_table


def test_a_label_after_a_first_line_without_one_is_refused(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "no label here"}\n\n{"text": "b", "label": "pos"}\n{"text": "c", "label": "neg"}\n')
    with pytest.raises(InputError, match=r"line 3 has a 'label' but line 1, the first, has none"):
        read_table(path)  # was: three texts and no labels at all


def test_the_choices_it_names_work(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "a"}\n{"text": "b", "label": "pos"}\n')
    assert read_table(path, TextColumns.of(label_column=None)).labels is None
    with pytest.raises(InputError, match=r"line 1: no column 'label'"):
        read_table(path, TextColumns.of(label_column="label"))


def test_files_without_labels_and_with_them_on_every_line_read_as_before(tmp_path):
    plain, labelled = tmp_path / "p.jsonl", tmp_path / "l.jsonl"
    plain.write_text('{"text": "a"}\n{"text": "b"}\n')
    labelled.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n')
    assert read_table(plain).labels is None
    assert read_table(labelled).labels.tolist() == [1, 0]
