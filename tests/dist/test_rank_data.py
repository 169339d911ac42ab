"""Every source kind takes part in the cross-rank data check (pipeline/ranks.py), under real torchrun.

One launch of two gloo ranks reads a case per source kind; in each, rank 1 holds data that
differs from rank 0's in one place (a token of a text store, a line of an on-the-fly TSV, a JPEG
of an image store or folder, a value of an HDF5 conversion, a value inside a store subset, a token
of packed text, a value of an HDF5 file read on the fly (whole, or a Subset of it), of arrays, of a
TensorDataset, of a plain Dataset's sampled last item). Every
rank must fail with a ConfigError naming rank 1 and the data. Cases whose ranks hold copies of the
same data made apart (converted twice, from files at other paths) must agree. Ranks whose memory sized other blocks for ``shuffle="block"`` are told to give the sizes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import stoker

sys.path.insert(0, str(Path(__file__).parent))
from test_torchrun import env, free_port, run, wait  # noqa: E402  (the launch helpers of the other torchrun tests)

pytestmark = pytest.mark.dist

WORKER = Path(__file__).with_name("data_worker.py")
WORDS = ["cat sat on the mat", "a dog ran", "birds sing at dawn", "the sea is calm", "rain again today"] * 2


def tsv(path: Path, words: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("text\tlabel\n" + "".join(f"{w}\t{i % 2}\n" for i, w in enumerate(words)))
    return path


def jpegs(root: Path, swap: int | None = None) -> Path:
    from PIL import Image

    for i in range(6):
        folder = root / f"class{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        color = (40 * i, 255 - 40 * i, 90 if i != swap else 200)
        Image.new("RGB", (24, 20), color).save(folder / f"img{i}.jpg", quality=90)
    return root


def values(changed: bool, row: int = 7) -> np.ndarray:
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    if changed:
        x[row, 2] += 0.5
    return x


def h5(path: Path, changed: bool) -> Path:
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        f["x"] = values(changed)
    return path


def npy(path: Path, changed: bool, row: int = 7) -> Path:
    np.save(path, values(changed, row))
    return path


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rankdata")
    other = WORDS[:3] + ["a dog sat"] + WORDS[4:]  # one word changed, one token for one, same length
    assert len(other) == len(WORDS)
    text = [tsv(tmp / "a" / "corpus.tsv", WORDS), tsv(tmp / "b" / "corpus.tsv", other)]
    same_text = [text[0], shutil.copy(text[0], tmp / "copy.tsv")]
    tstores = [stoker.convert.text(t, tmp / f"tstore{i}", max_length=16).path for i, t in enumerate(text)]
    tsame = [stoker.convert.text(t, tmp / f"tsame{i}", max_length=16).path for i, t in enumerate(same_text)]
    folders = [jpegs(tmp / "img_a"), jpegs(tmp / "img_b", swap=3)]
    same_folders = [folders[0], shutil.copytree(folders[0], tmp / "img_copy")]
    istores = [stoker.convert.images(f, tmp / f"istore{i}", size=16).path for i, f in enumerate(folders)]
    big = stoker.write(tmp / "big", {"x": np.zeros((20_000, 8), np.int64)})  # 64-byte rows, 1.3 MB
    hfiles = [h5(tmp / f"x{i}.h5", bool(i)) for i in range(2)]
    hstores = [stoker.convert.hdf5(f, tmp / f"hstore{i}").path for i, f in enumerate(hfiles)]
    hsame = [hfiles[0], shutil.copy(hfiles[0], tmp / "x_copy.h5")]
    arrays = [npy(tmp / f"x{i}.npy", bool(i)) for i in range(2)]
    last = [npy(tmp / f"last{i}.npy", bool(i), row=9) for i in range(2)]
    asame = [arrays[0], shutil.copy(arrays[0], tmp / "x_copy.npy")]
    cases = [
        ("text_store", "text_store", tstores),
        ("text", "text", text),
        ("image_store", "image_store", istores),
        ("images", "images", folders),
        ("hdf5", "store", hstores),
        ("subset", "subset", hstores),
        ("packed", "packed", text),
        ("hdf5_live", "hdf5_live", hfiles),
        ("hdf5_subset", "hdf5_subset", hfiles),
        ("arrays", "arrays", arrays),
        ("tensors", "tensors", arrays),
        ("dataset", "dataset", last),
        ("block_sizes", "block", [big, big], ["", "1MB"]),  # rank 1 sizes its blocks to 1 MB of memory
        ("same_text_store", "text_store", tsame),
        ("same_text", "text", same_text),
        ("same_images", "images", same_folders),
        ("same_packed", "packed", same_text),
        ("same_hdf5_live", "hdf5_live", hsame),
        ("same_arrays", "arrays", asame),
        ("same_dataset", "dataset", asame),  # its random transform draws alike on every rank
    ]
    plan = {"out": str(tmp), "cases": [{"name": c[0], "kind": c[1], "paths": [str(p) for p in c[2]]} for c in cases]}
    for case, given in zip(plan["cases"], cases):
        case["limits"] = given[3] if len(given) > 3 else ["", ""]
    (tmp / "plan.json").write_text(json.dumps(plan))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2"]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--max_restarts", "0"]
    wait([run([*cmd, str(WORKER), str(tmp / "plan.json")], env())], "torchrun data check (2 ranks)")
    return [json.loads((tmp / f"data.rank{r}.json").read_text()) for r in range(2)]


CHANGED = ["text_store", "text", "image_store", "images", "hdf5", "subset"]
CHANGED += ["packed", "hdf5_live", "hdf5_subset", "arrays", "tensors", "dataset"]


@pytest.mark.parametrize("case", CHANGED)
def test_one_changed_value_on_one_rank_fails_every_rank(launched, case):
    for seen in launched:  # was: a text or image source compared class and length only, and trained on
        said = seen[case]
        assert said.startswith("ConfigError") and "rank 1: data hash" in said, said


def test_ranks_whose_memory_sized_other_blocks_are_told_to_give_the_sizes(launched):
    for seen in launched:
        said = seen["block_sizes"]
        assert said.startswith("ConfigError") and "rank 1: order hash" in said, said
        assert "sizes block_size and window to each node's memory" in said


@pytest.mark.parametrize(
    "case",
    ["same_text_store", "same_text", "same_images", "same_packed", "same_hdf5_live", "same_arrays", "same_dataset"],
)
def test_copies_of_the_same_data_made_apart_agree(launched, case):
    assert [seen[case] for seen in launched] == ["no error", "no error"]
