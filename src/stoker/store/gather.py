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


class Plan:
    """Where each requested row lives: (shard, local row), grouped into runs of one shard."""

    def __init__(self, idx: np.ndarray, starts: np.ndarray, ascending: bool | None = None) -> None:
        """``ascending``: whether ``idx`` never decreases, when the caller knows (None: checked here)."""
        if not (ascending_order(idx) if ascending is None else ascending):
            shard = np.searchsorted(starts, idx, side="right") - 1
            self._set(shard, idx - starts[shard])
            return
        # sorted rows (a loader's batch): each shard's rows are one run, bounded by one search of
        # the shard starts among the rows; half the numpy calls of the general path
        cuts = np.searchsorted(idx, starts)
        counts = cuts[1:] - cuts[:-1]
        bounds = cuts.tolist()
        self.n = len(idx)
        self.sorted = True
        self.runs: list[tuple[int, np.ndarray | slice]] = [
            (s, slice(bounds[s], bounds[s + 1])) for s in counts.nonzero()[0].tolist()
        ]
        self.shard = np.repeat(np.arange(len(counts)), counts)
        self.local = idx - starts[self.shard]

    @classmethod
    def _of(cls, shard: np.ndarray, local: np.ndarray) -> Plan:
        plan = cls.__new__(cls)
        plan._set(shard, local)
        return plan

    def _set(self, shard: np.ndarray, local: np.ndarray) -> None:
        self.n = len(local)
        self.shard = shard
        self.local = local
        steps = np.diff(shard)
        self.sorted = bool(self.n < 2 or (steps >= 0).all())
        if self.sorted:
            # contiguous runs: (shard, start, stop) positions in the output
            if self.n == 0:
                self.runs = []
            else:
                bounds = [0, *(np.flatnonzero(steps) + 1).tolist(), self.n]
                firsts = shard[bounds[:-1]].tolist()
                self.runs = [(s, slice(a, b)) for s, a, b in zip(firsts, bounds[:-1], bounds[1:])]
        else:
            # each shard's positions, ascending: one stable argsort cut by the counts
            order = np.argsort(shard, kind="stable")
            counts = np.bincount(shard)
            ends, sizes = np.cumsum(counts).tolist(), counts.tolist()
            self.runs = [(s, order[ends[s] - sizes[s] : ends[s]]) for s in counts.nonzero()[0].tolist()]


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
    of the rows' views (one copy each), smaller rows by a take and a scatter per shard.
    """
    sources = {s: views[s].data for s, _ in plan.runs}
    if not plan.sorted and plan.n and take_across(sources, plan, out):
        return
    if (
        not plan.sorted
        and plan.n
        and out.nbytes >= VIEW_ROW_BYTES * plan.n
        and all(a.flags.c_contiguous for a in (out, *sources.values()))
    ):
        flat = {s: a.reshape(len(a), -1) for s, a in sources.items()}  # views: every array is contiguous
        rows = map(operator.getitem, map(flat.__getitem__, plan.shard.tolist()), plan.local.tolist())
        np.concatenate(list(rows), out=out.reshape(-1))
        return
    for shard, pos in plan.runs:
        src = views[shard].data
        if isinstance(pos, slice):
            # rows are in range (checked by the Store), so mode="clip" changes nothing; "raise" would buffer
            src.take(plan.local[pos], axis=0, out=out[pos], mode="clip")
        else:
            out[pos] = np.take(src, plan.local[pos], axis=0)


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
    during the gather). False, with nothing done, where an array is not contiguous, a row would be
    more than :data:`MAX_PIECES` elements, or a row lies past its shard's end.
    """
    arrays, shape = list(sources.values()), out.shape[1:]
    row_bytes = out.nbytes // max(plan.n, 1)
    if not row_bytes or not out.flags.c_contiguous:
        return False
    if not all(a.flags.c_contiguous and a.dtype == out.dtype and a.shape[1:] == shape for a in arrays):
        return False
    ptrs = [a.ctypes.data for a in arrays]
    base = min(ptrs)
    size = math.gcd(row_bytes, *(p - base for p in ptrs))
    pieces = row_bytes // size
    if pieces > MAX_PIECES:
        return False
    end = max(p + a.nbytes for p, a in zip(ptrs, arrays))
    span = np.asarray(_Span(base, (end - base) // size, size))
    table = np.zeros((max(sources) + 1, 2), dtype=np.int64)  # per shard: first element, rows
    table[list(sources)] = [((p - base) // size, len(a)) for p, a in zip(ptrs, arrays)]
    first, rows = table[plan.shard].T
    if not (plan.local < rows).all():  # a row past its shard's end (never read between shards)
        return False
    at = first + plan.local * pieces
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
