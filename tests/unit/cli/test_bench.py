"""stoker.cli.bench: every byte of a batch counts in MB/s, binary and string columns included."""

from __future__ import annotations

import numpy as np
import torch

from stoker.cli.bench import batch_bytes


def test_batch_bytes_counts_every_kind_of_column():
    batch = {
        "x": torch.zeros((4, 3), dtype=torch.int32),  # 48
        "blob": [b"abc", bytearray(b"de")],  # 5
        "text": ["é", "ab"],  # 2 + 2 (UTF-8)
        "nested": {"a": np.zeros(2, np.float64), "b": (b"z",)},  # 16 + 1
    }
    assert batch_bytes(batch) == 48 + 5 + 4 + 17
