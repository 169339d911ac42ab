"""A map-style torch ``Dataset`` as a batch source: ``__getitem__`` per row, then a collate.

``read`` fetches the samples of each batch (``__getitems__`` when the dataset has it, else
``dataset[i]`` per row; an error gets a note naming ``dataset[i]``) and ``collate`` stacks them
like torch's ``default_collate``, into numpy arrays. Its work is user Python, so it runs on the
process engine by default. A plain ``TensorDataset`` of CPU tensors needs none of that: it is
read as :class:`~stoker.pipeline.columns.ArrayColumns`, one gather per tensor per chunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stoker.pipeline.collate import default_collate, fetch
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.source import BatchSource


class DatasetSource(BatchSource):
    """Batches of a map-style dataset (``__len__`` and ``__getitem__``), read in worker processes."""

    engine = "processes"

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return f"DatasetSource({type(self.dataset).__name__}, rows={len(self)})"

    def read(self, chunk: list[np.ndarray]) -> list[list[Any]]:
        return [fetch(self.dataset, [int(i) for i in idx]) for idx in chunk]

    def collate(self, raw: list[Any]) -> Any:
        return default_collate(raw)


def tensor_columns(data: Any) -> ArrayColumns | None:
    """A plain ``TensorDataset`` of CPU tensors as array columns, else None.

    A subclass may change ``__getitem__``, and bfloat16 or GPU tensors have no numpy view: those
    keep the per-sample path.
    """
    import torch

    if type(data) is not torch.utils.data.TensorDataset or not data.tensors:
        return None
    if any(t.device.type != "cpu" or t.dtype == torch.bfloat16 for t in data.tensors):
        return None
    return ArrayColumns({str(i): t.detach().numpy() for i, t in enumerate(data.tensors)}, positional=True)


__all__ = ["DatasetSource", "tensor_columns"]
