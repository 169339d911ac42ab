"""The whole-input readers (``rows.bulk_rows``) give what the row-by-row readers give: the same
table, the same warnings, the same errors, on any .txt/.tsv file, list or dict of columns."""

import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stoker.text.inputs as inputs
from stoker.text.inputs import TextColumns, read_table
from stoker.text.rows import bulk_rows


def outcome(source, columns, bulk: bool):
    """read_table's table (or error) and warnings, with the whole-input readers on or off."""
    saved = inputs.bulk_rows
    if not bulk:
        inputs.bulk_rows = lambda *_: None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                t = read_table(source, columns)
                got = (
                    t.texts,
                    t.pairs,
                    None if t.labels is None else t.labels.tolist(),
                    t.label_names,
                    t.lines.tolist(),
                    t.skipped_empty,
                    t.replaced_lines,
                )
            except Exception as exc:  # noqa: BLE001 - the error itself is compared
                got = (type(exc).__name__, str(exc))
    finally:
        inputs.bulk_rows = saved
    return got, [str(w.message) for w in caught]


def same(source, columns):
    assert outcome(source, columns, bulk=True) == outcome(source, columns, bulk=False)


FIELD = st.text(alphabet="ab \t\r", max_size=4)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.one_of(st.just(None), st.lists(FIELD, min_size=1, max_size=3)), max_size=8),
    header=st.sampled_from(["text", "label\ttext", "text\tlabel\tb", "label\ttext_b\ttext", "x", ""]),
    ending=st.sampled_from(["\n", "\r\n"]),
    last_newline=st.booleans(),
    keep_empty=st.booleans(),
    pair=st.booleans(),
    suffix=st.sampled_from([".tsv", ".txt"]),
)
def test_files_read_whole_equal_files_read_row_by_row(rows, header, ending, last_newline, keep_empty, pair, suffix):
    lines = [header] + ["" if r is None else "\t".join(r) for r in rows]
    body = ending.join(lines) + (ending if last_newline else "")
    columns = TextColumns(keep_empty=keep_empty, pair="text_b" if pair and suffix == ".tsv" else None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"in{suffix}"
        path.write_text(body, encoding="utf-8", newline="")
        same(path, columns)


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab \t", max_size=3), max_size=8),
    labels=st.one_of(
        st.none(), st.lists(st.sampled_from(["x", "y", "", " ", "3", 7, 2.5, True, None]), min_size=8, max_size=8)
    ),
    keep_empty=st.booleans(),
)
def test_lists_and_dicts_read_whole_equal_row_by_row(texts, labels, keep_empty):
    columns = TextColumns(keep_empty=keep_empty)
    same(texts, columns)
    same({"text": texts} if labels is None else {"text": texts, "label": labels[: len(texts)]}, columns)


def test_clean_inputs_take_the_whole_input_readers(tmp_path):
    """The common inputs are read whole (the test above compares only what they give)."""
    tsv = tmp_path / "a.tsv"
    tsv.write_text("label\ttext\nneg\tbad film\npos\tgood\n")
    txt = tmp_path / "a.txt"
    txt.write_text("one\r\n\ntwo")
    for source in (tsv, txt, ["a", "b"], {"text": ["a", ""], "label": [1, 2]}):
        assert bulk_rows(source, TextColumns()) is not None
    t = read_table(tsv)
    assert t.texts == ["bad film", "good"] and t.labels.tolist() == [0, 1] and t.lines.tolist() == [2, 3]
    assert read_table(txt).texts == ["one", "", "two"]


@pytest.mark.parametrize(
    "data",
    [b"label\ttext\nneg\tok\npos\tbad \xff\n", b"label\ttext\nneg\tok\tmore\n"],
    ids=["invalid UTF-8", "extra field"],
)
def test_inputs_the_row_readers_must_name_are_left_to_them(tmp_path, data):
    path = tmp_path / "a.tsv"
    path.write_bytes(data)
    assert bulk_rows(path, TextColumns()) is None
    got, _ = outcome(path, TextColumns(), bulk=True)
    assert got[0] == "InputError" and "line 3" in got[1] or "line 2" in got[1]


def test_names_read_from_a_file_are_coded_by_a_lookup_each():
    t = read_table({"text": ["a", "b", "c"], "label": ["pos", "neg", "pos"]})
    assert t.labels.dtype == np.int64 and t.labels.tolist() == [1, 0, 1] and t.label_names == ("neg", "pos")


def test_array_labels_are_read_whole_and_generators_row_by_row():
    labels = np.array([3, 1, 3])
    assert bulk_rows({"text": ["a", " ", "c"], "label": labels}, TextColumns()) is not None
    for keep_empty in (True, False):
        same({"text": ["a", " ", "c"], "label": labels}, TextColumns(keep_empty=keep_empty))
    assert bulk_rows({"text": (t for t in ["a", "b"])}, TextColumns()) is None
    assert read_table({"text": (t for t in ["a", "b"])}).texts == ["a", "b"]
