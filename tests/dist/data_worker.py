"""One rank of the cross-rank data check launched by tests/dist/test_rank_data.py.

``python -m torch.distributed.run ... data_worker.py PLAN.json``: the plan lists cases, each a
source kind and one input path per rank. Every rank builds a loader of its own path, reads its
first batch (the first pass runs the check; ``limits``, when given, sets each rank's
``STOKER_MEMORY_LIMIT``), and writes ``<out>/data.rank<R>.json``: case name ->
``"no error"`` or ``"<ErrorClass>: <message>"``.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

import stoker
import stoker.sources
import stoker.text
import stoker.vision


class Rows(torch.utils.data.Dataset):
    """A plain Dataset over a ``.npy`` file, with a random transform drawn from torch's generator."""

    def __init__(self, path: str) -> None:
        self.x = np.load(path)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> Any:
        return torch.from_numpy(self.x[i]) + torch.rand(()), i % 2


def loader(kind: str, path: str) -> Any:
    """A loader of ``path`` read as ``kind``, split over the process group."""
    if kind in ("text", "text_store"):
        return stoker.text.Loader(path, batch_size=2, num_workers=0)
    if kind in ("images", "image_store"):
        source = stoker.vision.ImageSource(path, stoker.vision.eval_transforms(16, resize=16))
        return stoker.Loader(source, batch_size=2, num_workers=0)
    if kind == "block":  # rank r sized to the memory limit limits[r] (an empty one: the machine's)
        return stoker.Loader(path, batch_size=2, shuffle="block", num_workers=0)
    if kind == "subset":
        return stoker.Loader(stoker.open(path).select(list(range(1, 7))), batch_size=2, num_workers=0)
    if kind == "packed":
        return stoker.text.Loader(path, packing=True, max_length=4, batch_size=2, num_workers=0)
    if kind == "hdf5_live":
        return stoker.Loader(stoker.sources.HDF5(path), batch_size=2, num_workers=0)
    if kind == "hdf5_subset":  # rows 7.. of the file: the changed row of rank 1's is row 7
        return stoker.Loader(stoker.Subset(stoker.sources.HDF5(path), range(5, 9)), batch_size=2, num_workers=0)
    if kind == "arrays":
        return stoker.Loader(stoker.sources.Arrays(path, np.arange(10)), batch_size=2, num_workers=0)
    if kind == "tensors":
        x = torch.from_numpy(np.load(path))
        return stoker.Loader(torch.utils.data.TensorDataset(x, torch.arange(len(x))), batch_size=2, num_workers=0)
    if kind == "dataset":  # rank 1's differs in the last row, one of those sampled
        return stoker.Loader(Rows(path), batch_size=2, num_workers=0)
    return stoker.Loader(path, batch_size=2, num_workers=0)  # a store (an HDF5 conversion)


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    seen: dict[str, str] = {}
    for case in plan["cases"]:
        limit = case.get("limits", ["", ""])[rank]
        if limit:
            os.environ["STOKER_MEMORY_LIMIT"] = limit
        else:
            os.environ.pop("STOKER_MEMORY_LIMIT", None)
        try:
            next(iter(loader(case["kind"], case["paths"][rank])))
            seen[case["name"]] = "no error"
        except stoker.StokerError as exc:
            seen[case["name"]] = f"{type(exc).__name__}: {exc}"
    Path(plan["out"], f"data.rank{rank}.json").write_text(json.dumps(seen))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
