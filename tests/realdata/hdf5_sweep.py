"""Every dataset of real HDF5 files through ``sources.HDF5`` (via ``stoker.Loader``) and ``convert.hdf5``.

Each dataset is read twice, once per path, and compared with what h5py reads. An attempt ends
``equal``, ``refused`` (a StokerError; its message is kept) or ``wrong`` (values differ, or any
exception that is not a StokerError: a raw h5py, numpy or torch error).

    python tests/realdata/hdf5_sweep.py DIR      # prints the tally and every refusal
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import stoker
from stoker.errors import EmptyDatasetError, StokerError

SUFFIXES = (".h5", ".hdf5", ".he5", ".nc", ".mat")  # .mat: MATLAB v7.3 files (fetch_hdf5_samples keeps HDF5 ones)
MAX_ROWS = 5000  # rows compared per dataset (the files are small; this caps a large one)
MAX_DATASETS = 60  # datasets swept per file, evenly spaced in name order (two MATLAB files hold ~700)
SEP = "."  # compound fields: column "<dataset>.<field>.<subfield>"


@dataclass
class Attempt:
    file: str
    key: str
    path: str  # "source" or "convert"
    outcome: str  # "equal", "refused", "empty", "wrong"
    detail: str = ""
    h5py_reads: bool = True  # h5py itself reads the dataset (one row at least)


def h5files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file())


def datasets(path: Path) -> list[str]:
    """The datasets h5py sees in ``path`` (links that do not resolve are left out), at most
    :data:`MAX_DATASETS` of them, evenly spaced in name order."""
    import h5py

    names: list[str] = []
    try:
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    except OSError:
        return []
    names.sort()
    step = len(names) / MAX_DATASETS
    return names if len(names) <= MAX_DATASETS else [names[int(k * step)] for k in range(MAX_DATASETS)]


def expected(path: Path, key: str) -> dict[str, list[Any]] | None:
    """Column name -> rows as h5py reads them (compound fields flattened), or None when h5py cannot read it."""
    import h5py

    try:
        import hdf5plugin  # noqa: F401 - registers the filter plugins h5py lacks
    except ImportError:
        pass
    with h5py.File(path, "r") as f:
        ds = f[key]
        if ds.ndim == 0:
            return None
        try:
            arr = ds[: min(len(ds), MAX_ROWS)]
        except Exception:  # noqa: BLE001 - h5py itself cannot read it: no reference to compare with
            return None
    out: dict[str, list[Any]] = {}
    _flatten(key, arr, out)
    return out


def _flatten(name: str, arr: np.ndarray, out: dict[str, list[Any]]) -> None:
    if arr.dtype.names:
        for field in arr.dtype.names:
            _flatten(f"{name}{SEP}{field}", arr[field], out)
    else:
        out[name] = list(arr)


def same(want: list[Any], got: list[Any]) -> bool:
    if len(want) != len(got):
        return False
    for w, g in zip(want, got):
        if isinstance(w, (bytes, np.bytes_)) and isinstance(g, str):
            w = bytes(w).decode("utf-8")
        if isinstance(w, (bytes, str, np.bytes_, np.str_)) or isinstance(g, (bytes, str)):
            if type(g)(w) != g:
                return False
            continue
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape or not np.array_equal(w.astype(g.dtype, copy=False), g, equal_nan=g.dtype.kind in "fc"):
            return False
        if w.dtype.kind in "fc" and not np.array_equal(w, g.astype(w.dtype), equal_nan=True):
            return False
    return True


def _compare(want: dict[str, list[Any]], got: dict[str, list[Any]]) -> str:
    if sorted(want) != sorted(got):
        return f"columns {sorted(got)} != h5py's {sorted(want)}"
    for name in want:
        if not same(want[name], got[name][: len(want[name])]):
            return f"column {name!r} differs from h5py"
    return ""


def via_source(path: Path, key: str) -> dict[str, list[Any]]:
    """Rows of ``key`` read through ``stoker.Loader(stoker.sources.HDF5(...))``, per column."""
    got: dict[str, list[Any]] = {}
    loader = stoker.Loader(stoker.sources.HDF5(path, key), batch_size=64, shuffle=False, num_workers=0)
    for batch in loader:
        for name, value in batch.items():
            if name.endswith("_lengths") and name[: -len("_lengths")] in batch:
                continue
            lengths = batch.get(f"{name}_lengths")
            if lengths is not None:
                rows = [value[i, : int(n)].numpy() for i, n in enumerate(lengths)]
            elif isinstance(value, list):
                rows = value
            else:
                rows = list(value.numpy())
            got.setdefault(name, []).extend(rows)
    return got


def via_convert(path: Path, key: str, tmp: Path) -> dict[str, list[Any]]:
    """Rows of ``key`` converted into a store and read back with ``stoker.open``, per column."""
    store = tmp / "store"
    stoker.convert.hdf5(path, store, keys=key, overwrite=True, progress=False)
    ds = stoker.open(store)
    rows = ds.gather(np.arange(min(len(ds), MAX_ROWS)))
    return {name: list(value) for name, value in rows.items()}


def attempt(path: Path, key: str, which: str, tmp: Path) -> Attempt:
    name = path.name
    want = expected(path, key)
    readable = want is not None and any(len(rows) for rows in want.values())
    try:
        got = via_source(path, key) if which == "source" else via_convert(path, key, tmp)
    except EmptyDatasetError as exc:
        empty = want is not None and all(not rows for rows in want.values())
        return Attempt(
            name, key, which, "empty" if empty else "wrong", f"{type(exc).__name__}: {exc}", h5py_reads=readable
        )
    except StokerError as exc:
        return Attempt(name, key, which, "refused", f"{type(exc).__name__}: {exc}", h5py_reads=readable)
    except Exception as exc:  # noqa: BLE001 - anything else is a failure of stoker, recorded as such
        return Attempt(name, key, which, "wrong", f"raw {type(exc).__name__}: {exc}", h5py_reads=readable)
    if want is None:
        return Attempt(name, key, which, "wrong", "loaded, but h5py cannot read it", h5py_reads=readable)
    diff = _compare(want, got)
    return Attempt(name, key, which, "wrong" if diff else "equal", diff, h5py_reads=readable)


def sweep(root: Path) -> list[Attempt]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in h5files(root):
            for key in datasets(path):
                for which in ("source", "convert"):
                    out.append(attempt(path, key, which, Path(tmp)))
    return out


def tally(attempts: list[Attempt]) -> str:
    count = Counter(a.outcome for a in attempts)
    keys = {(a.file, a.key) for a in attempts}
    lines = [
        f"{len(keys)} datasets, {len(attempts)} attempts: " + ", ".join(f"{k} {v}" for k, v in sorted(count.items()))
    ]
    readable = [a for a in attempts if a.h5py_reads]
    count = Counter(a.outcome for a in readable)
    lines.append(
        f"of which h5py reads {len({(a.file, a.key) for a in readable})} datasets (one row or more), "
        f"{len(readable)} attempts: " + ", ".join(f"{k} {v}" for k, v in sorted(count.items()))
    )
    for a in attempts:
        if a.outcome != "equal":
            lines.append(f"  {a.outcome:8} {a.path:8} {a.file}:{a.key}: {a.detail[:300]}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(tally(sweep(Path(sys.argv[1]))))
