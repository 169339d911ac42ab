"""Batch gathers: where each requested row lives, and its columns copied out of the shards.

:class:`Plan` maps requested rows to (shard, local row) and groups them into runs of one
shard; :func:`gather_columns` copies every asked column along it. Fixed-width (tensor)
columns are copied with one ``np.take`` per shard run straight into the output buffer;
sequence columns become a :class:`Ragged`, binary and string columns lists.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stoker.store.columns import Ragged
from stoker.store.format import Column
from stoker.store.shards import ColumnView

MAX_PIECES = 8  # a shuffled row is taken across shards as at most this many equal pieces (take_across)
VIEW_ROW_BYTES = 1024  # else rows of several shards at least this large are copied as views, once each
SCRATCH_BYTES = 1024 * 1024  # a shuffled batch of a column up to this size: gathered sorted, then scattered


class Plan:
    """Where each requested row lives: (shard, local row), grouped into runs of one shard.

    Rows that never decrease, or that all lie in one shard, are ``sorted``: each run is a slice of
    the output. Otherwise a run is the output positions of one shard's rows, ascending by row;
    ``by_row`` is then the sorted plan of the same rows and ``order`` their positions in the output.
    """

    runs: list[tuple[int, np.ndarray | slice]]
    shard: np.ndarray
    local: np.ndarray

    def __init__(self, idx: np.ndarray, starts: np.ndarray, ascending: bool | None = None) -> None:
        """``ascending``: whether ``idx`` never decreases, when the caller knows (None: checked here)."""
        self.n, self.order, self._by_row = len(idx), None, None
        # one shard: its rows are one run in any order (each search of a shard start then finds 0 or n)
        if len(starts) > 2 and not (ascending_order(idx) if ascending is None else ascending):
            order = np.argsort(idx)
            self._by_row = by_row = Plan(idx[order], starts, True)
            self.shard = np.empty_like(by_row.shard)
            self.shard[order] = by_row.shard
            self.local = idx - starts[self.shard]
            self.sorted = len(by_row.runs) < 2  # all in one shard: one take, whatever the order
            self.runs = by_row.runs if self.sorted else [(s, order[pos]) for s, pos in by_row.runs]
            self.order = None if self.sorted else order
            return
        # each shard's rows are one run, bounded by one search of the shard starts among the rows
        cuts = np.searchsorted(idx, starts)
        counts = cuts[1:] - cuts[:-1]
        bounds = cuts.tolist()
        self.sorted = True
        self.runs = [(s, slice(bounds[s], bounds[s + 1])) for s in counts.nonzero()[0].tolist()]
        self.shard = np.repeat(np.arange(len(counts)), counts)
        self.local = idx - starts[self.shard]

    @property
    def by_row(self) -> Plan:
        """The plan of the same rows sorted (this plan, where they are)."""
        return self._by_row or self


def ascending_order(idx: np.ndarray) -> bool:
    """Whether the rows ``idx`` never decrease (a loader's batches are sorted before the gather)."""
    return len(idx) < 2 or bool((idx[1:] >= idx[:-1]).all())


def gather_columns(
    schema: Mapping[str, Column],
    names: Sequence[str],
    shards: Mapping[int, Any],
    plan: Plan,
    out: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Columns ``names`` of the rows of ``plan`` from ``shards`` (shard number -> opened shard).

    ``out`` may hold preallocated arrays for tensor columns, shaped ``(plan.n, *row_shape)``;
    they are filled and returned.
    """
    tensors = [name for name in names if schema[name].kind == "tensor"]
    targets = {name: _target(schema[name], plan.n, None if out is None else out.get(name)) for name in tensors}
    views = {name: {s: shard.columns[name] for s, shard in shards.items()} for name in names}

    if plan.n:
        for name in tensors:
            gather_tensor(views[name], plan, targets[name])
    result: dict[str, Any] = {}
    for name in names:
        col = schema[name]
        if col.kind == "tensor":
            result[name] = targets[name]
        elif col.kind == "sequence":
            result[name] = gather_ragged(col, views[name], plan)
        else:
            result[name] = gather_blobs(views[name], plan, col.kind == "string")
    return result


def _target(col: Column, n: int, out: np.ndarray | None) -> np.ndarray:
    shape = (n, *col.row_shape)
    if out is None:
        return np.empty(shape, dtype=col.numpy_dtype)
    if out.shape != shape or out.dtype != col.numpy_dtype:
        raise ValueError(
            f"out buffer for a {col.dtype}{list(col.row_shape)} column has shape {out.shape} "
            f"and dtype {out.dtype}, expected {shape}"
        )
    return out


def gather_tensor(views: Mapping[int, ColumnView], plan: Plan, out: np.ndarray) -> None:
    """Rows of ``plan`` of one fixed-width column into ``out`` (``plan.n`` rows), in the plan's order.

    Rows in one run of a shard are one ``take`` into their slice of ``out``. Rows of several shards
    interleaved (a shuffled batch in sampled order) are one ``take`` over all the shards at once
    (:func:`take_across`): each row copied once, straight to its place, with no Python per row.
    Where that does not apply, rows of at least :data:`VIEW_ROW_BYTES` by one ``np.concatenate``
    of the rows' views (one copy each). Batches of at most :data:`SCRATCH_BYTES`, and the rest, are
    gathered sorted into a scratch array, then put in place by one scatter.
    """
    sources = {s: views[s].data for s, _ in plan.runs}
    if plan.sorted:
        for shard, pos in plan.runs:
            # rows are in range (checked by the Store), so mode="clip" changes nothing; "raise" would buffer
            sources[shard].take(plan.local[pos], axis=0, out=out[pos], mode="clip")
        return
    if out.nbytes > SCRATCH_BYTES and take_across(sources, plan, out):
        return
    if (
        out.nbytes > SCRATCH_BYTES
        and out.nbytes >= VIEW_ROW_BYTES * plan.n
        and all(a.flags.c_contiguous for a in (out, *sources.values()))
    ):
        flat = {s: a.reshape(len(a), -1) for s, a in sources.items()}  # views: every array is contiguous
        rows = map(operator.getitem, map(flat.__getitem__, plan.shard.tolist()), plan.local.tolist())
        np.concatenate(list(rows), out=out.reshape(-1))
        return
    scratch = np.empty_like(out)
    gather_tensor(views, plan.by_row, scratch)
    out[plan.order] = scratch


class _Span:
    """Memory from address ``ptr`` on, as ``n`` read-only elements of ``size`` bytes (``np.asarray`` of it)."""

    def __init__(self, ptr: int, n: int, size: int) -> None:
        self.__array_interface__ = {"data": (ptr, True), "shape": (n,), "typestr": f"|V{size}", "version": 3}


def take_across(sources: Mapping[int, np.ndarray], plan: Plan, out: np.ndarray) -> bool:
    """Rows of ``plan`` from the shards' arrays ``sources`` into ``out`` with one ``np.take``.

    The shards lie at different addresses. Seen as one array of ``g``-byte elements running from
    the lowest shard's first row to the end of the highest shard, where ``g`` divides the row size
    and every distance between two shards' first rows, each row is ``row_bytes // g`` consecutive
    elements; one take of those elements, in the plan's order, fills ``out``. Only the indexed
    elements are read: the memory between shards is never touched (the Store checked that every
    row is in range, every row is checked to lie inside its shard here, and the shards stay mapped
    during the gather). False, with nothing done, for a sorted plan (one take per shard serves it),
    where an array is not contiguous, a row would be more than :data:`MAX_PIECES` elements, or a
    row lies past its shard's end.
    """
    if plan.sorted or not out.flags.c_contiguous:
        return False
    shards, arrays = [s for s, _ in plan.runs], [sources[s] for s, _ in plan.runs]
    if not all(a.flags.c_contiguous and a.dtype == out.dtype and a.shape[1:] == out.shape[1:] for a in arrays):
        return False
    # the rows sorted: each shard's last is its highest, and none may lie past its shard's end
    lasts = [p.stop - 1 for _, p in plan.by_row.runs if isinstance(p, slice)]  # by_row's runs are slices
    if any(top >= len(a) for top, a in zip(plan.by_row.local[lasts].tolist(), arrays)):
        return False
    row_bytes, ptrs = out.nbytes // plan.n, [a.ctypes.data for a in arrays]
    base = min(ptrs)
    size = math.gcd(row_bytes, *(p - base for p in ptrs))
    pieces = row_bytes // size if row_bytes else 0
    if not 0 < pieces <= MAX_PIECES:
        return False
    end = max(p + a.nbytes for p, a in zip(ptrs, arrays))
    span = np.asarray(_Span(base, (end - base) // size, size))
    first = np.zeros(max(shards) + 1, dtype=np.int64)  # each shard's first element
    first[shards] = [(p - base) // size for p in ptrs]
    at = first[plan.shard] + plan.local * pieces
    if pieces > 1:
        at = (at[:, None] + np.arange(pieces)).reshape(-1)
    np.take(span, at, out=out.reshape(-1).view(span.dtype), mode="clip")
    return True


def gather_ragged(col: Column, views: Mapping[int, ColumnView], plan: Plan) -> Ragged:
    """Rows of ``plan`` of one sequence column as a :class:`Ragged`."""
    lengths = np.empty(plan.n, dtype=np.int64)
    starts = np.empty(plan.n, dtype=np.int64)
    for shard, pos in plan.runs:
        off = views[shard].row_offsets()
        local = plan.local[pos]
        starts[pos] = off[local]
        lengths[pos] = off[local + 1] - starts[pos]
    offsets = np.zeros(plan.n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=col.numpy_dtype)
    for shard, pos in plan.runs:
        if isinstance(pos, slice):  # rows in a run: their values land in one contiguous range
            a, b = int(offsets[pos.start]), int(offsets[pos.stop])
            if a < b:
                src = np.repeat(starts[pos] - offsets[pos.start : pos.stop], lengths[pos]) + np.arange(a, b)
                np.take(views[shard].data, src, out=values[a:b])
            continue
        rows = np.arange(plan.n)[pos]
        run_len = lengths[rows]
        if not run_len.sum():
            continue
        # flat source index of every value of these rows, without a Python loop
        dest = np.repeat(offsets[rows], run_len) + ramp(run_len)
        src = np.repeat(starts[rows], run_len) + ramp(run_len)
        values[dest] = views[shard].data[src]
    return Ragged(values, offsets)


def ramp(lengths: np.ndarray) -> np.ndarray:
    """[0..l0-1, 0..l1-1, ...] for lengths [l0, l1, ...]."""
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)


def gather_blobs(views: Mapping[int, ColumnView], plan: Plan, as_text: bool) -> list[Any]:
    """Rows of ``plan`` of one binary (bytes) or string (str) column as a list.

    Each shard run's positions and byte ranges become Python ints in one ``tolist`` call each, not
    numpy scalars indexed row by row.
    """
    result: list[Any] = [None] * plan.n
    for shard, pos in plan.runs:
        view = views[shard]
        off, data = view.row_offsets(), view.data
        local = plan.local[pos]
        rows = np.arange(plan.n)[pos].tolist()
        for i, a, b in zip(rows, off[local].tolist(), off[local + 1].tolist()):
            raw = data[a:b].tobytes()
            result[i] = raw.decode("utf-8") if as_text else raw
    return result


__all__ = [
    "Plan",
    "ascending_order",
    "gather_blobs",
    "gather_columns",
    "gather_ragged",
    "gather_tensor",
    "ramp",
    "take_across",
]
