import json

import numpy as np
import pytest

from stoker.errors import EmptyDatasetError, InputError
from stoker.text.inputs import TextColumns, iter_blocks, read_table


def test_txt_keeps_empty_lines_or_skips_them_with_a_warning_naming_them(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("one\n\n   \ntwo\r\nthree\n")
    kept = read_table(p)  # every line is an example, as HF's text builder reads it
    assert kept.texts == ["one", "", "   ", "two", "three"] and kept.skipped_empty == 0
    with pytest.warns(UserWarning, match=r"a\.txt: keep_empty=False skipped empty texts at lines 2, 3 "):
        t = read_table(p, TextColumns(keep_empty=False))
    assert t.texts == ["one", "two", "three"] and t.skipped_empty == 2 and t.lines.tolist() == [1, 4, 5]


def test_invalid_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(InputError, match=r"bad\.txt, line 3, byte 5: invalid UTF-8") as info:
        read_table(p)
    assert info.value.line == 3 and info.value.path == p
    t = read_table(p, TextColumns(encoding_errors="replace"))
    assert t.texts[2] == "bad \ufffd byte" and t.replaced_lines == 1


def test_jsonl_with_labels_and_missing_column(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text(
        "\n".join(
            json.dumps(r)
            for r in [{"text": "a b", "label": "pos"}, {"text": "c", "label": "neg"}, {"text": "d", "label": "pos"}]
        )
    )
    t = read_table(p)
    assert t.labels.tolist() == [1, 0, 1] and t.label_names == ("neg", "pos")  # sorted names
    with pytest.raises(InputError, match=r"no column 'body'; the columns found are \['label', 'text'\]"):
        read_table(p, TextColumns(text="body"))
    with pytest.raises(InputError, match="no column 'y'"):
        read_table(p, TextColumns(label="y"))


def test_csv_tsv_and_pairs(tmp_path):
    c = tmp_path / "a.csv"
    c.write_text('premise,hypothesis,label\n"A man, sleeping",A person rests,1\nDogs bark,Cats meow,0\n')
    t = read_table(c, TextColumns(text="premise", pair="hypothesis"))
    assert t.texts == ["A man, sleeping", "Dogs bark"] and t.pairs == ["A person rests", "Cats meow"]
    assert t.labels.dtype == np.int64 and t.labels.tolist() == [1, 0]
    s = tmp_path / "a.tsv"
    s.write_text('label\ttext\nsport\the said "yes"\n')
    assert read_table(s).texts == ['he said "yes"']
    with pytest.raises(InputError, match=r"the columns found are \['label', 'text'\]"):
        read_table(s, TextColumns(text="sentence"))


def test_lists_and_empty_sources(tmp_path):
    assert read_table(["x", "", "y"]).texts == ["x", "", "y"]
    with pytest.warns(UserWarning, match="at rows 1 "):
        assert read_table(["x", "", "y"], TextColumns(keep_empty=False)).texts == ["x", "y"]
    assert read_table([("a", "b")], TextColumns(pair="text_b")).pairs == ["b"]
    with pytest.raises(EmptyDatasetError, match="2 empty lines skipped"), pytest.warns(UserWarning):
        read_table(["", " "], TextColumns(keep_empty=False))
    with pytest.raises(InputError, match="unknown text format"):
        (tmp_path / "x.parquet").write_text("")
        read_table(tmp_path / "x.parquet")


def test_blocks_stream_in_order(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("".join(f"line {i}\n" for i in range(25)))
    blocks = list(iter_blocks(p, block_rows=10))
    assert [len(b.texts) for b in blocks] == [10, 10, 5]
    assert [t for b in blocks for t in b.texts] == [f"line {i}" for i in range(25)]


def test_text_label_rows_and_dicts_of_lists():
    t = read_table([("good film", 1), ("bad film", 0), ("fine", 1.5)])
    assert t.texts == ["good film", "bad film", "fine"] and t.labels.dtype == np.float32
    assert t.labels.tolist() == [1.0, 0.0, 1.5] and t.label_names is None
    d = read_table({"text": ["good film", "bad film"], "label": ["pos", "neg"]})
    assert d.labels.tolist() == [1, 0] and d.label_names == ("neg", "pos")
    assert read_table([("a", 1)], TextColumns(label=None)).labels is None
    with pytest.raises(InputError, match=r"row 0 is a pair of texts.*dict of lists"):
        read_table([("good film", "pos")])
    with pytest.raises(InputError, match=r"row 1 is a single text but row 0 is a \(text, label\) row"):
        read_table([("a", 1), "b"])
    with pytest.raises(InputError, match=r"row 0 is a \(text, label\) row; with pair_column"):
        read_table([("a", 1)], TextColumns(pair="b"))


def test_tables_know_the_line_of_every_example(tmp_path):
    p = tmp_path / "c.tsv"
    p.write_text("label\ttext\npos\tfirst\n\nneg\t\nneg\tlast\n")
    t = read_table(p)  # line 3 is blank (no example, as pandas reads it); line 4 an empty text, kept
    assert t.lines.tolist() == [2, 4, 5] and t.describe(2) == f"{p}, line 5"
    assert read_table(["a", " ", "b"]).describe(2) == "row 2 of a list of 3 examples"
