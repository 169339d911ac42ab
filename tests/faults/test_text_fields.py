"""CSV/TSV fields (issue 36 item 9) larger than the csv module's default limit (128 KiB) load whole; a record the csv
module cannot parse is an InputError naming its line, never a raw ``_csv.Error``."""

from __future__ import annotations

import pytest

from stoker.errors import InputError
from stoker.text.inputs import read_table

pytestmark = pytest.mark.faults

BIG = 3 * 2**20  # a few MB: the csv module's default field limit is 131072 characters


def test_a_tsv_field_of_a_few_megabytes_loads(tmp_path):
    path = tmp_path / "big.tsv"
    path.write_text("label\ttext\n1\t" + "x" * BIG + "\n0\thello\n")
    table = read_table(path)  # raised _csv.Error: field larger than field limit (131072)
    assert [len(t) for t in table.texts] == [BIG, 5]
    assert table.lines.tolist() == [2, 3]


def test_a_quoted_csv_field_of_a_few_megabytes_loads(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text('label,text\n1,"' + "y, " * (BIG // 3) + '"\n0,hello\n')
    table = read_table(path)
    assert [len(t) for t in table.texts] == [BIG // 3 * 3, 5]


def test_a_tsv_text_holding_a_carriage_return_keeps_it(tmp_path):
    path = tmp_path / "cr.tsv"
    path.write_bytes(b"text\tlabel\nbefore\rafter\tpos\n")
    table = read_table(path)  # raised _csv.Error: new-line character seen in unquoted field
    assert table.texts == ["before\rafter"]


def test_an_unparsable_csv_record_names_its_line(tmp_path):
    path = tmp_path / "cr.csv"
    path.write_bytes(b"text,label\nok,pos\nbefore\rafter,pos\n")
    with pytest.raises(InputError, match=r"cr\.csv, line 3: not a CSV record"):
        read_table(path)
