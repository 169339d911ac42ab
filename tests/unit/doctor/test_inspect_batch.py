"""stoker.doctor.inspect_batch: what a batch holds, and its padding share."""

import torch

from stoker.doctor.events import BatchDesc, TensorDesc
from stoker.doctor.inspect_batch import describe, padding_share


def test_padding_share_and_describe():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    assert padding_share(ids) == 1 - 3 / 8
    assert padding_share(torch.zeros(2, 4)) is None  # floats are not token ids
    d = describe(
        {"input_ids": torch.zeros(2, 16, dtype=torch.int64), "attention_mask": torch.tensor([[1] * 4 + [0] * 12] * 2)}
    )
    assert isinstance(d, BatchDesc) and d.type == "dict"
    assert d.padding == 0.75 and d.tensors[0] == TensorDesc("input_ids", "int64", (2, 16), "cpu")
    assert describe((torch.zeros(3, 3, 8, 8, dtype=torch.uint8), torch.arange(3))).tensors[0].dtype == "uint8"
