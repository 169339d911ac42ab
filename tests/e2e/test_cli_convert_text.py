import subprocess
import sys

import stoker
from stoker.cli.main import main


def test_convert_text_writes_a_store_and_reports(tmp_path, capsys):
    src = tmp_path / "corpus.tsv"
    src.write_text("label\ttext\nsport\tThe match ended in a draw.\n\t\nnews\tMarkets rose sharply on Monday.\n")
    assert main(["convert", "text", str(src), str(tmp_path / "s"), "--max-length", "8"]) == 0
    out = capsys.readouterr().out
    assert "2 examples" in out and "1 empty lines skipped" in out and "1 truncated" in out
    ds = stoker.open(tmp_path / "s")
    assert ds.metadata["stoker.text"]["label_names"] == ["news", "sport"]  # sorted
    assert ds[0]["input_ids"][0] == 101


def test_convert_text_keeps_empty_texts_unless_told(tmp_path, capsys):
    src = tmp_path / "corpus.txt"
    src.write_text("first line\n\nthird line\n")
    assert main(["convert", "text", str(src), str(tmp_path / "s")]) == 0
    assert len(stoker.open(tmp_path / "s")) == 3  # was 2: the empty line 2 left out by default
    assert main(["convert", "text", str(src), str(tmp_path / "t"), "--no-keep-empty"]) == 0
    assert len(stoker.open(tmp_path / "t")) == 2 and "1 empty lines skipped" in capsys.readouterr().out


def test_convert_text_bad_utf8_exits_1_naming_the_line(tmp_path):
    src = tmp_path / "bad.txt"
    src.write_bytes(b"ok\n\xc3\x28 broken\n")
    proc = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "convert", "text", str(src), str(tmp_path / "s")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "bad.txt, line 2" in proc.stderr and "--encoding-errors replace" in proc.stderr
    assert not (tmp_path / "s").exists()
    assert main(["convert", "text", str(src), str(tmp_path / "s"), "--encoding-errors", "replace"]) == 0


def test_convert_text_label_names_give_splits_one_map(tmp_path, capsys):
    src = tmp_path / "val.tsv"
    src.write_text("label\ttext\npos\tlovely\nneg\tawful\n")
    assert main(["convert", "text", str(src), str(tmp_path / "s"), "--label-names", "pos,neg"]) == 0
    assert 'labels (id order): ["pos", "neg"]' in capsys.readouterr().out
    ds = stoker.open(tmp_path / "s")
    assert ds.metadata["stoker.text"]["label_names"] == ["pos", "neg"] and ds[1]["labels"] == 1
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stoker.cli.main",
            "convert",
            "text",
            str(src),
            str(tmp_path / "t"),
            "--label-names",
            "pos",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "val.tsv, line 3: label 'neg' is not in label_names" in proc.stderr
