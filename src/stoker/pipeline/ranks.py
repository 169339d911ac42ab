"""Ranks: which rank this process is, and a check that every rank loads the same data the same way.

``distributed_rank`` reads torch.distributed when it is initialized. When it is not, but the
environment says the process is one of several (``WORLD_SIZE`` > 1, as set by ``torchrun``), it
refuses instead of loading the whole dataset on every rank.

``check_agreement`` runs once per loader, at its first pass, when the loader's ranks are those
of the initialized default process group: every rank contributes one fixed-size int64 tensor of
facts (row count, a fingerprint of the data, the order settings, the batches per epoch) to
one ``all_gather`` (on the device for NCCL, on the CPU otherwise), and every rank raises the same
``ConfigError`` naming the ranks that differ from rank 0 and in what. Every rank that shares the
loader's epoch must start its first pass (as every rank of a DDP job does).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from stoker.errors import ConfigError
from stoker.pipeline.columns import ArrayColumns
from stoker.pipeline.source import BatchSource
from stoker.pipeline.store_source import StoreSource
from stoker.store.columns import Ragged
from stoker.store.reader import Store

ORDER_FACT = "order"  # the loader's fact of its batch sampler's settings
BLOCK_HINT = (
    "where the order differs, note that shuffle='block' sizes block_size and window to each node's memory "
    "unless both are given (loader.block_order says what each rank chose): give them"
)
_RAW = 2**62  # an int fact below this travels as itself (the message can show it), anything else as a hash
WHOLE_BYTES = 256 * 2**20  # arrays (and HDF5 datasets) up to this many bytes in all are hashed whole
SAMPLE_RUNS, SAMPLE_BYTES = 256, 64 * 2**20  # beyond: this many evenly spaced runs of rows, this many bytes in all


def distributed_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """``(rank, world_size)``: the given values, else torch.distributed's when it is initialized, else (0, 1).

    Raises ConfigError when a value must be guessed but the environment names several ranks
    (``WORLD_SIZE`` > 1) and torch.distributed is not initialized: every rank would read the
    whole dataset.
    """
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        r, w = dist.get_rank(), dist.get_world_size()
    else:
        r, w = 0, 1
        if rank is None or world_size is None:
            _refuse_unsplit(os.environ.get("WORLD_SIZE"), os.environ.get("RANK"))
    return (r if rank is None else rank), (w if world_size is None else world_size)


def _refuse_unsplit(env_world: str | None, env_rank: str | None) -> None:
    try:
        world = int(env_world or 1)
    except ValueError:
        return  # not a launcher's value: nothing to say about ranks
    if world > 1:
        raise ConfigError(
            f"WORLD_SIZE={world} is set (this is rank {env_rank or '?'} of a distributed launch) but "
            "torch.distributed is not initialized, so this loader would read the whole dataset on every rank: "
            "call torch.distributed.init_process_group() before building the loader, or pass rank= and "
            "world_size= explicitly (rank=0, world_size=1 to read everything on purpose)",
            option="world_size",
        )


def shares_process_group(rank: int | None, world_size: int | None) -> bool:
    """Whether a loader of ``rank`` of ``world_size`` splits its epoch over the default process group."""
    dist = torch.distributed
    if rank is None or world_size is None or world_size <= 1:
        return False
    if not (dist.is_available() and dist.is_initialized()):
        return False
    return bool(dist.get_world_size() == world_size and dist.get_rank() == rank)


def digest(parts: Iterable[bytes | str | np.ndarray]) -> str:
    """A short SHA-256 hash of ``parts`` in order (each one length-prefixed, so their boundaries
    count); an array counts by its bytes."""
    h = hashlib.sha256()
    for part in parts:
        data = (
            _raw(part).data
            if isinstance(part, np.ndarray)
            else memoryview(part.encode() if isinstance(part, str) else part)
        )
        h.update(data.nbytes.to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


def _raw(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a`` in C order, as a flat uint8 array (a view when ``a`` is contiguous)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def row_runs(rows: int, row_bytes: int, unit: int = 1) -> list[tuple[int, int]]:
    """The ``(start, stop)`` runs of rows a fingerprint hashes: every row (in runs of about 1 MiB)
    when ``rows x row_bytes`` is at most ``WHOLE_BYTES``, else ``SAMPLE_RUNS`` runs of
    ``SAMPLE_BYTES`` in all (fewer when whole units make runs longer), evenly spaced, the first
    rows included. Runs start on multiples of ``unit`` (an HDF5 chunk's rows, read whole anyway)
    and span whole units, when a unit holds at most 1 MiB."""
    per_row = max(1, row_bytes)
    unit = unit if unit * per_row <= 2**20 else 1  # a run never spans more than 1 MiB to cover a chunk
    if rows * per_row <= WHOLE_BYTES:
        step = -(-max(1, 2**20 // per_row) // unit) * unit
        return [(i, min(i + step, rows)) for i in range(0, rows, step)]
    length = -(-max(1, SAMPLE_BYTES // SAMPLE_RUNS // per_row) // unit) * unit
    count = min(SAMPLE_RUNS, max(2, SAMPLE_BYTES // (length * per_row)))
    starts = np.linspace(0, max(0, rows - length), num=count, dtype=np.int64) // unit * unit
    return [(int(s), min(int(s) + length, rows)) for s in np.unique(starts)]


def value_parts(value: Any) -> Iterator[bytes | str | np.ndarray]:
    """What ``digest`` hashes of one value read from a source: arrays and tensors by dtype, shape and
    bytes; ``Ragged`` by values and offsets; dicts by sorted keys; lists and tuples item by item;
    numbers, strings, bytes and None by themselves; anything else by its array (``np.asarray``:
    a PIL image) when it has a numeric one, else by its type's name alone (never a repr, which
    can hold a memory address)."""
    if isinstance(value, (str, bytes, bool, int, float, complex)) or value is None:
        yield f"{type(value).__name__}:" if isinstance(value, bytes) else repr(value)
        if isinstance(value, bytes):
            yield value
        return
    if isinstance(value, Ragged):
        yield from ("ragged", *value_parts(value.values), *value_parts(value.offsets))
        return
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            yield from (f"key:{key}", *value_parts(value[key]))
        return
    if isinstance(value, (list, tuple)):
        yield f"{type(value).__name__}:{len(value)}"
        for item in value:
            yield from value_parts(item)
        return
    if type(value).__module__.startswith("torch") and hasattr(value, "numpy"):
        value = value.detach().cpu()
        value = value.float().numpy() if str(value.dtype) == "torch.bfloat16" else value.numpy()
    kind = type(value)
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.hasobject:
        yield f"{kind.__module__}.{kind.__qualname__}"
        return
    yield f"{arr.dtype.str}{arr.shape}"
    yield arr


def arrays_fingerprint(columns: Mapping[str, np.ndarray]) -> str:
    """The content of equal-length arrays (``Arrays``, a ``TensorDataset``): each column's name,
    dtype and shape, and the bytes of the rows ``row_runs`` picks: every byte up to
    ``WHOLE_BYTES``, else 64 MiB in 256 evenly spaced runs: a change outside the sample then goes unseen."""
    arrays = {str(k): np.asarray(v) for k, v in columns.items()}
    rows = len(next(iter(arrays.values()))) if arrays else 0
    row_bytes = sum(v.dtype.itemsize * int(np.prod(v.shape[1:], dtype=np.int64)) for v in arrays.values())
    runs = row_runs(rows, row_bytes)
    shapes = json.dumps([(k, v.dtype.str, v.shape) for k, v in arrays.items()])
    return "arrays:" + digest([shapes, json.dumps(runs), *(v[a:b] for a, b in runs for v in arrays.values())])


def store_fingerprint(store: Store) -> str:
    """The content of ``store``: its columns and every shard's row count and checksum, and a view's
    rows. Shard names, the manifest's metadata and the store's path are left out, so copies of one
    store, or the same input converted on two nodes, agree; one changed value changes a checksum."""
    schema = json.dumps({name: col.to_json() for name, col in store.schema.items()}, sort_keys=True, default=str)
    shards = json.dumps([(s.rows, s.algorithm, s.checksum) for s in store.manifest.shards])
    rows = store.rows
    return "store:" + digest([schema, shards, b"" if rows is None else np.ascontiguousarray(rows).tobytes()])


def _sizes(paths: Sequence[str]) -> np.ndarray:
    out = np.full(len(paths), -1, dtype=np.int64)  # -1: a file that cannot be read (on_error decides later)
    for i, path in enumerate(paths):
        try:
            out[i] = os.stat(path).st_size
        except OSError:
            pass
    return out


def _head(path: str, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def files_fingerprint(
    paths: Sequence[str], root: str | None, labels: Sequence[int] | None, sampled: int = 16, head: int = 65536
) -> str:
    """A hash of every file's name (relative to ``root``) and size, the labels, and the first ``head``
    bytes of ``sampled`` files spread over the list: one ``stat`` per file (on 8 threads: on a network
    file system each is a round trip) and a few reads. Modification times are left out: per-node copies
    of one folder differ in them. A file swapped for another of the same size and head, outside the
    sample, goes unseen; a store's checksums see every byte."""
    step = max(1, -(-len(paths) // 8))
    with ThreadPoolExecutor(8) as pool:  # a slice a task: a task per file would cost more than its stat
        parts = pool.map(_sizes, [paths[i : i + step] for i in range(0, len(paths), step)])
        sizes = np.concatenate([np.zeros(0, np.int64), *parts])
    picked = np.unique(np.linspace(0, len(paths) - 1, num=min(sampled, len(paths)), dtype=np.int64)).tolist()
    under = os.path.join(root, "") if root else "\0"  # names under the root (as vision's ImageList.name)
    names = "\0".join(p[len(under) :] if p.startswith(under) else p for p in paths)
    said = "" if labels is None else ",".join(map(str, labels))
    return "files:" + digest([names, sizes.tobytes(), said, *(_head(paths[i], head) for i in picked)])


def data_fingerprint(source: BatchSource | Store) -> str:
    """What identifies the rows of ``source``: a store's content (``store_fingerprint``), arrays'
    bytes (``arrays_fingerprint``), the source's own ``content_fingerprint()`` when it has one (text,
    image, packed text and HDF5 sources; a ``Subset``: its indices and its parent's; a Dataset),
    else the source's class and length. A fingerprint that raises (a file one rank cannot read) is
    warned about and stands as the error's class, never raised: the other ranks would wait for
    this one in ``all_gather``."""
    inner: Any = source.store if isinstance(source, StoreSource) else source
    own = getattr(inner, "content_fingerprint", None)
    try:
        if isinstance(inner, Store):
            return store_fingerprint(inner)
        if isinstance(inner, ArrayColumns):
            return arrays_fingerprint(inner.columns)
        if callable(own):
            return str(own())
    except Exception as exc:  # any error of user code or I/O: warned, then compared
        warnings.warn(f"stoker: the data's fingerprint could not be taken on this rank: {exc!r}", stacklevel=2)
        return f"unreadable:{type(exc).__qualname__}"
    kind = type(inner)
    return f"{kind.__module__}.{kind.__qualname__}:{len(inner)}"


def _is_raw(value: Any) -> bool:
    return isinstance(value, (bool, int, np.integer)) and -_RAW < int(value) < _RAW


def _encode(value: Any) -> int:
    if _is_raw(value):
        return int(value)
    text = json.dumps(value, sort_keys=True, default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True)


def _show(code: int, raw: bool) -> str:
    return str(code) if raw else f"hash {code & (2**64 - 1):016x}"


def check_agreement(facts: dict[str, Any], what: str = "this loader") -> None:
    """Compare ``facts`` across every rank of the default process group; raise ConfigError on all
    ranks when any rank differs from rank 0, naming the ranks and the facts."""
    dist = torch.distributed
    names = list(facts)
    codes = [_encode(facts[k]) for k in names]
    raw = [_is_raw(facts[k]) for k in names]  # a hash is shown as one, whatever its value
    device = torch.device("cpu")
    if "nccl" in str(dist.get_backend()).lower():
        device = torch.device("cuda", torch.cuda.current_device())
    mine = torch.tensor(codes, dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    table = [t.cpu().tolist() for t in gathered]
    me = dist.get_rank()
    lines = []
    for r, row in enumerate(table[1:], start=1):
        differs = [i for i in range(len(names)) if row[i] != table[0][i]]
        if differs:
            said = ", ".join(
                f"{names[i]} {_show(row[i], raw[i])} (rank 0: {_show(table[0][i], raw[i])})" for i in differs
            )
            lines.append(f"rank {r}: {said}")
    if lines:
        if any(f"{ORDER_FACT} " in line for line in lines):
            lines.append(BLOCK_HINT)
        ranks = ", ".join(line.split(":", 1)[0] for line in lines if line.startswith("rank "))
        what = what if len(what) <= 200 else what[:197] + "..."  # a source's repr can hold a whole vocabulary
        raise ConfigError(
            f"the ranks do not load the same data the same way ({what}; {ranks} differ from rank 0; "
            f"seen from rank {me}): " + "; ".join(lines) + ". Every rank must open the same store or input "
            "files (the same copy: a stale copy has other rows; data compares their content) with the same "
            "loader options; fix the ranks named",
            option="rank",
        )
