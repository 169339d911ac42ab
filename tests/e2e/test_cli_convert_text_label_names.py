"""`stoker convert text`: label names holding commas (a JSON list), a val split given the train store's map, the summary."""

from __future__ import annotations

import json
import subprocess
import sys

import stoker
from stoker.cli.main import main

TRAIN = "label\ttext\nChandler, Joey\thow you doin\nMonica\tI know!\nRoss\twe were on a break\n"
VAL = "label\ttext\nRoss\tpivot\nChandler, Joey\tcould I be any more\n"


def _labels_line(out: str) -> list[str]:
    line = next(line for line in out.splitlines() if "labels (id order):" in line)
    return json.loads(line.split("labels (id order):", 1)[1])


def test_a_json_list_gives_names_holding_commas(tmp_path, capsys):
    src = tmp_path / "train.tsv"
    src.write_text(TRAIN)
    names = ["Ross", "Chandler, Joey", "Monica"]
    assert main(["convert", "text", str(src), str(tmp_path / "s"), "--label-names", json.dumps(names)]) == 0
    assert _labels_line(capsys.readouterr().out) == names  # the summary reads back unambiguously
    ds = stoker.open(tmp_path / "s")
    assert ds.metadata["stoker.text"]["label_names"] == names
    assert [int(ds[i]["labels"]) for i in range(len(ds))] == [1, 2, 0]


def test_label_names_from_the_train_store_give_val_the_same_map(tmp_path, capsys):
    (tmp_path / "train.tsv").write_text(TRAIN)
    (tmp_path / "val.tsv").write_text(VAL)
    assert main(["convert", "text", str(tmp_path / "train.tsv"), str(tmp_path / "train")]) == 0
    train_names = _labels_line(capsys.readouterr().out)
    assert train_names == ["Chandler, Joey", "Monica", "Ross"]  # sorted
    argv = ["convert", "text", str(tmp_path / "val.tsv"), str(tmp_path / "val")]
    assert main([*argv, "--label-names-from", str(tmp_path / "train")]) == 0
    assert _labels_line(capsys.readouterr().out) == train_names
    val = stoker.open(tmp_path / "val")
    assert val.metadata["stoker.text"]["label_names"] == train_names
    assert [int(val[i]["labels"]) for i in range(len(val))] == [2, 0]  # Ross 2, "Chandler, Joey" 0 as in train


def test_label_names_from_a_store_without_labels_exits_1_saying_so(tmp_path):
    (tmp_path / "plain.txt").write_text("one line\nanother\n")
    (tmp_path / "val.tsv").write_text(VAL)
    assert main(["convert", "text", str(tmp_path / "plain.txt"), str(tmp_path / "plain")]) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "convert", "text", str(tmp_path / "val.tsv"), str(tmp_path / "v")]
        + ["--label-names-from", str(tmp_path / "plain")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "--label-names-from" in proc.stderr and "has no label names" in proc.stderr
    assert not (tmp_path / "v").exists()


def test_a_malformed_json_list_exits_1(tmp_path):
    (tmp_path / "val.tsv").write_text(VAL)
    proc = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "convert", "text", str(tmp_path / "val.tsv"), str(tmp_path / "v")]
        + ["--label-names", '["Ross", "Chandler, Joey"'],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "not a JSON list" in proc.stderr
