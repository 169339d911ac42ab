"""``stoker convert images`` end to end, through the CLI entry point."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.cli.main import main

sys.path.insert(0, str(Path(__file__).parent.parent / "unit" / "vision"))
from vision_images import corrupt_files, make_folder  # noqa: E402


def test_convert_encoded_then_inspect(tmp_path, capsys):
    src = make_folder(tmp_path)
    assert main(["convert", "images", str(src), str(tmp_path / "s"), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "12 images" in out and "classes  3: ant, moth, zebra" in out
    assert main(["inspect", str(tmp_path / "s"), "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)["metadata"]
    assert meta["classes"] == ["ant", "moth", "zebra"] and meta["mode"] == "encoded"


def test_convert_resized_with_hxw_size(tmp_path, capsys):
    src = make_folder(tmp_path)
    assert main(["convert", "images", str(src), str(tmp_path / "r"), "--mode", "resized", "--size", "24x32"]) == 0
    ds = stoker.open(tmp_path / "r")
    assert ds.schema["image"].shape == (3, 24, 32)
    assert np.asarray(ds[:]["label"]).tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_bad_image_exits_1_naming_it_and_skip_goes_on(tmp_path, capsys):
    corrupt_files(tmp_path)
    assert main(["convert", "images", str(tmp_path / "bad"), str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("stoker: error: ") and "corrupt.jpg" in err
    assert not (tmp_path / "s").exists()
    assert main(["convert", "images", str(tmp_path / "bad"), str(tmp_path / "s"), "--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    assert "1 images" in captured.out and "4 skipped" in captured.out
    assert "skipped  empty.jpg: the file is empty" in captured.err


def test_flat_folder_with_labels_option(tmp_path, capsys):
    src = make_folder(tmp_path)
    flat = tmp_path / "flat"
    flat.mkdir()
    for p in sorted(src.rglob("*.jpg"))[:3]:
        (flat / f"{p.parent.name}_{p.name}").write_bytes(p.read_bytes())
    names = sorted(x.name for x in flat.iterdir())
    (tmp_path / "y.csv").write_text("".join(f"{n},{n.split('_')[0]}\n" for n in names))
    assert main(["convert", "images", str(flat), str(tmp_path / "s"), "--labels", str(tmp_path / "y.csv")]) == 0
    assert stoker.open(tmp_path / "s").metadata["classes"] == ["ant"]


@pytest.mark.parametrize("argv", [["--size", "big"], ["--mode", "png"]])
def test_bad_arguments_exit_2(tmp_path, argv):
    with pytest.raises(SystemExit) as info:
        main(["convert", "images", str(tmp_path), str(tmp_path / "s"), *argv])
    assert info.value.code == 2


def test_missing_source_exits_1(tmp_path, capsys):
    assert main(["convert", "images", str(tmp_path / "nope"), str(tmp_path / "s")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_demo_images_section_says_how_to_fetch_when_data_is_missing(tmp_path, capsys):
    from stoker.cli import demo, demo_images

    assert "stoker.cli.demo_images" in demo.SECTIONS
    demo_images.run(tmp_path, 0.1)
    assert "scripts/fetch_data.py images" in capsys.readouterr().out


def test_demo_images_names_the_engine_its_loader_runs_on(tmp_path, capsys):
    from stoker.cli import demo_images

    make_folder(tmp_path / "images")  # images/photos, as scripts/fetch_data.py lays it out
    demo_images.run(tmp_path, 0.01)
    out = capsys.readouterr().out
    engine = stoker.Loader(
        stoker.vision.ImageSource(tmp_path / "stores" / "photos", [stoker.vision.RandomResizedCrop(224)]), batch_size=8
    ).engine
    assert f"flip, {engine})" in out  # it said "threads" whatever the engine was


def test_a_val_split_takes_the_train_store_s_classes(tmp_path, capsys):
    """--label-names-from TRAIN_STORE: a val folder missing a class numbers the others as train did."""
    import shutil

    train, val = make_folder(tmp_path / "t"), make_folder(tmp_path / "v")
    shutil.rmtree(val / "ant")
    assert main(["convert", "images", str(train), str(tmp_path / "tr")]) == 0
    assert main(["convert", "images", str(val), str(tmp_path / "va"), "--label-names-from", str(tmp_path / "tr")]) == 0
    assert "classes  3: ant, moth, zebra" in capsys.readouterr().out
    assert stoker.open(tmp_path / "va").metadata["class_to_idx"] == {"ant": 0, "moth": 1, "zebra": 2}
    assert main(["convert", "images", str(val), str(tmp_path / "v2"), "--label-names", "moth,zebra,ant"]) == 0
    assert stoker.open(tmp_path / "v2").metadata["class_to_idx"] == {"moth": 0, "zebra": 1, "ant": 2}
    capsys.readouterr()
    stoker.write(tmp_path / "plain", {"x": np.arange(4)})
    assert (
        main(["convert", "images", str(val), str(tmp_path / "v3"), "--label-names-from", str(tmp_path / "plain")]) == 1
    )
    assert "has no label names" in capsys.readouterr().err
