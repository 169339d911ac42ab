"""What a batch holds, for the advice: tensor dtypes, shapes and devices, and the padding share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from stoker.doctor.events import BatchDesc, TensorDesc

_MAX_TENSORS = 16


def _tensors(batch: Any, path: str = "") -> list[tuple[str, Any]]:
    """The batch's tensors by path, and its lists of strings (raw text the loop must still process)."""
    if isinstance(batch, torch.Tensor) or (isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], str)):
        return [(path or "batch", batch)]
    items: Iterable[tuple[Any, Any]]
    if isinstance(batch, dict):
        items = batch.items()
    elif isinstance(batch, (list, tuple)):
        items = enumerate(batch)
    else:
        return []
    out: list[tuple[str, Any]] = []
    for k, v in items:
        out.extend(_tensors(v, f"{path}.{k}" if path else str(k)))
        if len(out) >= _MAX_TENSORS:
            break
    return out[:_MAX_TENSORS]


def padding_share(x: torch.Tensor) -> float | None:
    """Share of a 2-D integer tensor (token ids) that is trailing zeros, or None for other tensors."""
    if x.dim() != 2 or x.dtype.is_floating_point or x.dtype == torch.bool or x.numel() == 0 or x.shape[1] < 2:
        return None
    nz = (x != 0).to(torch.int64)
    # index of the last non-zero + 1 in each row (0 for an all-zero row)
    positions = torch.arange(1, x.shape[1] + 1, device=x.device)
    lengths = (nz * positions).amax(dim=1)
    return float(1.0 - lengths.sum().item() / x.numel())


def describe(batch: Any) -> BatchDesc:
    """What ``batch`` (a dict, tuple or list of tensors) holds: its first tensors and its padding share."""
    tensors = _tensors(batch)
    found = []
    padding = None
    for path, t in tensors:
        if not isinstance(t, torch.Tensor):
            found.append(TensorDesc(path, "str", (len(t),), "cpu"))
            continue
        found.append(TensorDesc(path, str(t.dtype).replace("torch.", ""), tuple(t.shape), str(t.device)))
        if path.endswith("attention_mask") and t.dim() == 2:
            padding = float(1.0 - t.float().mean().item())
        elif padding is None:
            share = padding_share(t)
            if share is not None and t.shape[1] >= 8:
                padding = share
    return BatchDesc(type(batch).__name__, tuple(found), padding)
