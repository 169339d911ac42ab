"""CSV/TSV rows: a quoted text spanning lines keeps its line break and is placed on its first line; a row
with more fields than the header is refused."""

from __future__ import annotations

import pytest

from stoker.errors import InputError
from stoker.text.inputs import read_table


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_quoted_field_over_two_lines_keeps_its_line_break(tmp_path, newline):
    path = tmp_path / "q.csv"
    lines = ["text,label", '"hello, world",pos', '"multi', 'line",neg', ",neg", "plain,pos", ""]
    path.write_bytes(newline.join(lines).encode())
    table = read_table(path)
    assert table.texts == ["hello, world", "multi\nline", "", "plain"]  # was "multiline": two words made one
    assert table.lines.tolist() == [2, 3, 5, 6]  # the record starts on line 3 (was placed on its last, 4)
    assert table.describe(1) == f"{path}, line 3"
    assert table.skipped_empty == 0  # the empty text of ",neg" is kept


def test_a_short_record_after_a_long_one_names_its_first_line(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('text,label\n"two\nlines",a\nshort\n')
    with pytest.raises(InputError, match=r"q\.csv, line 4: 1 fields, the header has 2"):
        read_table(path)


def test_tsv_rows_are_unchanged(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text('text\tlabel\nhas "quote\tx\n\nsecond\ty\n')
    table = read_table(path)
    assert table.texts == ['has "quote', "second"] and table.lines.tolist() == [2, 4]


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("q.csv", "text,label\nok,pos\nhello, world,pos\n", r"line 3: 3 fields, the header has 2 .*must be quoted"),
        (
            "q.tsv",
            "text\tlabel\nok\tpos\nhello\tworld\tpos\n",
            r"line 3: 3 fields, the header has 2 .*cannot hold a tab",
        ),
    ],
)
def test_a_row_with_more_fields_than_the_header_is_refused(tmp_path, name, content, match):
    """An unquoted comma split the text: it was read as text 'hello' with label ' world'."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputError, match=match):
        read_table(path)
