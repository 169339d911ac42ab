"""In-memory and memory-mapped arrays as a batch source: the TensorDataset habit, batch-level.

``Arrays(x, y)`` or ``Arrays(image=x, label=y)`` takes numpy arrays, torch tensors (CPU),
``.npy`` paths (memory-mapped), an uncompressed ``.npz`` path (each member memory-mapped in
place inside the zip) or a ``TensorDataset``. A chunk of batches is one ``np.take`` per
column; positional arrays give tuple batches (``for x, y in loader``), named ones dicts.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, SchemaError
from stoker.pipeline.columns import ArrayColumns
from stoker.sources._common import check_lengths, check_numeric

_ZIP_LOCAL_HEADER = 30


def _is_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "numpy")


def load_npy(path: Path) -> np.ndarray:
    """A ``.npy`` file, memory-mapped read-only."""
    if not path.is_file():
        raise FileNotFoundError(f"no .npy file at {path}")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise SchemaError(
            f"{path} holds Python objects ({exc}); only numeric arrays can be memory-mapped", column=str(path)
        ) from exc


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every member of an uncompressed ``.npz`` as a memory map into the zip file itself."""
    if not path.is_file():
        raise FileNotFoundError(f"no .npz file at {path}")
    out: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
        for info in zf.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if info.compress_type != zipfile.ZIP_STORED:
                raise ConfigError(
                    f"{path}: member {name!r} is compressed (np.savez_compressed) and cannot be memory-mapped; "
                    "save it with np.savez, or load it yourself and pass the arrays",
                    option="arrays",
                )
            raw.seek(info.header_offset)
            header = raw.read(_ZIP_LOCAL_HEADER)
            name_len = int.from_bytes(header[26:28], "little")
            extra_len = int.from_bytes(header[28:30], "little")
            raw.seek(info.header_offset + _ZIP_LOCAL_HEADER + name_len + extra_len)
            version = np.lib.format.read_magic(raw)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(raw)
            if dtype.hasobject:
                raise SchemaError(
                    f"{path}: member {name!r} holds Python objects; only numeric arrays can be memory-mapped",
                    column=name,
                )
            offset = raw.tell()
            out[name] = np.memmap(
                path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C"
            )
    return out


def as_numpy(value: Any, name: str) -> np.ndarray:
    """One column as a numpy array (a view where possible)."""
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        if path.suffix == ".npz":
            raise ConfigError(
                f"column {name!r}: {path} is an .npz with several arrays; pass it alone, not as one column",
                option="arrays",
            )
        value = load_npy(path)
    elif _is_tensor(value):
        if str(value.dtype) == "torch.bfloat16":
            raise SchemaError(f"column {name!r}: bfloat16 has no numpy dtype; convert with .float() first", column=name)
        value = value.detach().cpu().numpy()
    elif not isinstance(value, np.ndarray):
        value = np.asarray(value)
    if value.ndim == 0:
        raise SchemaError(
            f"column {name!r} is a single value; a column needs one row per entry along its first axis", column=name
        )
    check_numeric(
        value.dtype, f"column {name!r}", "convert it to a numeric dtype, or store it with stoker.write as str/bytes"
    )
    return value


def as_columns(arrays: tuple[Any, ...], named: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], bool]:
    """Normalize the inputs of Arrays/convert.arrays; returns (name -> array, positional?)."""
    if len(arrays) == 1 and not named:
        only = arrays[0]
        if isinstance(only, Mapping):
            return as_columns((), only)
        if isinstance(only, (str, os.PathLike)) and Path(only).suffix == ".npz":
            return as_columns((), load_npz(Path(only)))
        if isinstance(only, np.lib.npyio.NpzFile):
            raise ConfigError(
                "pass the .npz path rather than np.load(...)'s result, so its members are memory-mapped",
                option="arrays",
            )
        tensors = getattr(only, "tensors", None)
        if isinstance(tensors, tuple) and tensors and all(_is_tensor(t) for t in tensors):  # torch TensorDataset
            arrays = tensors
    if arrays and named:
        raise ConfigError("give the arrays either all positionally or all by name", option="arrays")
    if not arrays and not named:
        raise ConfigError("no arrays were given", option="arrays")
    if arrays:
        columns = {str(i): as_numpy(a, str(i)) for i, a in enumerate(arrays)}
    else:
        columns = {str(k): as_numpy(v, str(k)) for k, v in named.items()}
    check_lengths({k: len(v) for k, v in columns.items()}, "arrays")
    return columns, bool(arrays)


class Arrays(ArrayColumns):
    """Batches from arrays that are already in memory or memory-mapped (no conversion).

    ``Arrays(x, y)`` yields ``(x_batch, y_batch)`` tuples like a TensorDataset in a DataLoader;
    ``Arrays(image=x, label=y)`` or ``Arrays({"image": x, ...})`` yields dicts; ``Arrays("d.npz")``
    yields dicts of the members. Rows inside a batch come in storage order.
    """

    def __init__(self, *arrays: Any, **named: Any) -> None:
        columns, positional = as_columns(arrays, named)
        super().__init__(columns, positional)
