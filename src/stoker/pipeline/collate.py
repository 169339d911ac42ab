"""Turning a list of samples into one batch, and batches into flat leaves and back.

``default_collate`` stacks samples like torch's, into numpy arrays (tensors travel as numpy, so a
batch can be written into shared memory); ``flatten``/``unflatten`` take nested dicts, lists and
tuples apart into leaves so that every array of a batch can be moved on its own; ``join_rows``
makes one batch of the parts a first batch was read in.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def fetch(dataset: Any, indices: list[int]) -> list[Any]:
    if hasattr(dataset, "__getitems__"):
        return list(dataset.__getitems__(indices))
    samples = []
    for i in indices:
        try:
            samples.append(dataset[i])
        except Exception as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"stoker: dataset[{i}] raised this")
            raise
    return samples


def _to_numpy(value: Any) -> Any:
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
        t = value.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            return BF16(t.view(dtype=_torch_int16()).numpy())
        return t.numpy()
    return value


class BF16:
    """A bfloat16 tensor travelling as its int16 bits (numpy has no bfloat16)."""

    def __init__(self, bits: np.ndarray) -> None:
        self.bits = bits


def _torch_int16():
    import torch

    return torch.int16


def default_collate(samples: list[Any], path: str = "sample") -> Any:
    """Stack a list of samples like torch's default_collate, into numpy arrays."""
    first = samples[0]
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples], f"{path}[{k!r}]") for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # namedtuple
        return type(first)(
            *(default_collate(list(col), f"{path}.{name}") for name, col in zip(first._fields, zip(*samples)))
        )
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(col), f"{path}[{i}]") for i, col in enumerate(zip(*samples)))
    if isinstance(first, (str, bytes)) or first is None:
        return list(samples)
    values = [_to_numpy(s) for s in samples]
    if isinstance(values[0], BF16):
        values = [v.bits for v in values]
        return BF16(_stack(values, path))
    return _stack([np.asarray(v) for v in values], path)


def _stack(arrays: list[np.ndarray], path: str) -> np.ndarray:
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(
            f"cannot stack {path} into a batch: its shapes differ ({', '.join(str(s) for s in sorted(shapes)[:4])}); "
            "pass a collate_fn that pads or crops them, or store them as stoker.Sequence"
        )
    return np.stack(arrays)


def flatten(tree: Any) -> tuple[list[Any], Any]:
    """Leaves of nested dict/list/tuple and a spec to rebuild it."""
    leaves: list[Any] = []
    return leaves, _walk(tree, leaves)


def _walk(node: Any, leaves: list[Any]) -> Any:
    # A module-level function, not a closure: a recursive closure is a reference cycle that would
    # keep ``leaves`` (views of recycled batch buffers) alive until the garbage collector runs.
    if isinstance(node, dict):
        return ("dict", [(k, _walk(v, leaves)) for k, v in node.items()])
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return ("namedtuple", type(node), [_walk(v, leaves) for v in node])
    if isinstance(node, (tuple, list)) and not (node and isinstance(node[0], (str, bytes))):
        return (type(node).__name__, [_walk(v, leaves) for v in node])
    leaves.append(_to_numpy(node))
    return ("leaf", len(leaves) - 1)


def unflatten(spec: Any, leaves: list[Any]) -> Any:
    kind = spec[0]
    if kind == "leaf":
        return leaves[spec[1]]
    if kind == "dict":
        return {k: unflatten(v, leaves) for k, v in spec[1]}
    if kind == "namedtuple":
        return spec[1](*(unflatten(v, leaves) for v in spec[2]))
    items = [unflatten(v, leaves) for v in spec[1]]
    return tuple(items) if kind == "tuple" else items


def join_rows(parts: list[Any]) -> Any:
    """One batch of ``parts``, batches of consecutive rows of it (a rowwise source's first batch, read
    in parts): tensors and arrays concatenated along their first dimension, lists of strings or bytes
    (file names) joined, dicts, tuples and other lists leaf by leaf."""
    first = parts[0]
    if isinstance(first, dict):
        return {k: join_rows([p[k] for p in parts]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(join_rows(list(leaf)) for leaf in zip(*parts)))
    if isinstance(first, (tuple, list)):
        if any(p and isinstance(p[0], (str, bytes)) for p in parts):
            return type(first)(x for p in parts for x in p)
        return type(first)(join_rows(list(leaf)) for leaf in zip(*parts))
    if isinstance(first, np.ndarray):
        return np.concatenate(parts)
    if type(first).__module__.startswith("torch"):
        import torch

        if first.device.type == "cpu" and first.dtype != torch.bfloat16:  # one memcpy: torch.cat's OpenMP
            return torch.from_numpy(np.concatenate([p.detach().numpy() for p in parts]))  # team stalls on busy cores
        return torch.cat(parts)
    raise TypeError(f"the parts of a batch hold a {type(first).__name__}, which cannot be joined by rows")
