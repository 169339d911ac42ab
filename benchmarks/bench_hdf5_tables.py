"""Compound HDF5 tables (the PyTables layout) into the loader, side by side in one run, ratios printed.

A table of ``rows`` records ``(id int64, x float32[8], label int32, name S8)`` (52 bytes, packed),
written contiguous and as gzip chunks of 4,096 rows (PyTables' usual layout). Contenders, batches
of 256:

- the common pattern: a torch ``Dataset`` reading ``ds[i]`` (one record) per index through h5py,
  fields to tensors, ``DataLoader(num_workers=cores, shuffle=True)``;
- ``stoker.Loader(stoker.sources.HDF5(path, "t"), shuffle=True | "block")``: all four fields as
  columns (``t.id``, ``t.x``, ``t.label``, ``t.name`` as a list of bytes), rows memory-mapped or
  chunk-decoded by stoker and cut into fields.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_hdf5_tables.py [--rows 500000] [--seconds 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import Result, print_table, rate  # noqa: E402

ROW = np.dtype([("id", "<i8"), ("x", "<f4", (8,)), ("label", "<i4"), ("name", "S8")])


class RecordDataset:
    """One h5py record per ``__getitem__``, its numeric fields as tensors (file opened in each worker)."""

    def __init__(self, path: str, key: str) -> None:
        self.path, self.key, self.ds = path, key, None
        import h5py

        with h5py.File(path, "r") as f:
            self.n = len(f[key])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int):
        import h5py
        import torch

        if self.ds is None:
            self.ds = h5py.File(self.path, "r")[self.key]
        rec = self.ds[index]
        return {
            "id": torch.tensor(rec["id"]),
            "x": torch.from_numpy(rec["x"].copy()),
            "label": torch.tensor(rec["label"]),
        }


def write(path: str, rows: int) -> None:
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        contig = f.create_dataset("contig", (rows,), ROW)
        gz = f.create_dataset("gz", (rows,), ROW, chunks=(4096,), compression="gzip", compression_opts=1)
        for a in range(0, rows, 100_000):
            b = min(a + 100_000, rows)
            t = np.zeros(b - a, ROW)
            t["id"], t["label"] = np.arange(a, b), rng.integers(0, 10, b - a)
            t["x"] = rng.random((b - a, 8))
            t["name"] = [b"row%05d" % (i % 100_000) for i in range(a, b)]
            contig[a:b], gz[a:b] = t, t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    import torch

    import stoker

    cores = len(os.sched_getaffinity(0))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "table.h5")
        write(path, args.rows)
        for key in ("contig", "gz"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dl = torch.utils.data.DataLoader(
                    RecordDataset(path, key), batch_size=256, shuffle=True, num_workers=cores, persistent_workers=True
                )
                base = rate(lambda dl=dl: dl, lambda b: len(b["id"]), seconds=args.seconds)[0]
                del dl
            workload = f"{key} table, batches of 256"
            results.append(
                Result(workload, f"h5py record per index, DataLoader({cores} workers)", base, base * 52 / 1e6)
            )
            for shuffle in (True, "block"):
                loader = stoker.Loader(stoker.sources.HDF5(path, key), batch_size=256, shuffle=shuffle)
                r = rate(lambda loader=loader: loader, lambda b, k=key: len(b[f"{k}.id"]), seconds=args.seconds)[0]
                results.append(
                    Result(workload, f"stoker HDF5 source, shuffle={shuffle}", r, r * 52 / 1e6, {"ratio": r / base})
                )
    print_table(results)
    for r in results:
        if "ratio" in r.extra:
            print(f"{r.workload:32} {r.contender:40} {r.extra['ratio']:6.1f}x the DataLoader pattern")


if __name__ == "__main__":
    main()
