"""Batch gathers: where each requested row lives, and its columns copied out of the shards.

:class:`Plan` maps requested rows to (shard, local row) and groups them into runs of one
shard; :func:`gather_columns` copies every asked column along it. Fixed-width (tensor)
columns are copied straight into the output buffer, with one ``np.take`` per shard run of sorted
rows, or one over all the shards for a shuffled batch (:func:`take_across`); sequence columns
become a :class:`Ragged`, binary and string columns lists.
"""

from __future__ import annotations

import functools
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
    """Where each requested row lives: (shard, local row), and the shards it touches (``shards``).

    Rows that never decrease, or that all lie in one shard, are ``sorted``: each of ``runs`` is a
    touched shard and the slice of the output its rows fill. Otherwise (a shuffled batch) the rows
    are placed by one search of the shard starts, and ``runs``, ``by_row`` (the sorted plan of the
    same rows) and ``order`` (their positions in the output) are made only when a gather asks: the
    one take across the shards (:func:`take_across`) needs none of them.
    """

    shard: np.ndarray
    local: np.ndarray
    shards: list[int]

    def __init__(self, idx: np.ndarray, starts: np.ndarray, ascending: bool | None = None) -> None:
        """``ascending``: whether ``idx`` never decreases, when the caller knows (None: checked here)."""
        self.n, self.idx, self.starts = len(idx), idx, starts
        self._runs: list[tuple[int, np.ndarray | slice]] | None = None
        self._by_row: Plan | None = None
        self._order: np.ndarray | None = None
        # one shard: its rows are one run in any order (each search of a shard start then finds 0 or n)
        if len(starts) > 2 and not (ascending_order(idx) if ascending is None else ascending):
            self.shard = np.searchsorted(starts, idx, side="right") - 1
            try:
                counts: np.ndarray | None = np.bincount(self.shard, minlength=len(starts) - 1)
            except ValueError:  # a row below 0 finds shard -1
                counts = None
            if counts is None or len(counts) >= len(starts):  # one past the end finds the shard count
                raise IndexError(f"rows must lie in [0, {int(starts[-1])}), got {int(idx.min())}..{int(idx.max())}")
            self.local = idx - starts[self.shard]
            self.shards = np.flatnonzero(counts).tolist()
            self.sorted = len(self.shards) < 2  # all in one shard: one take, whatever the order
            if self.sorted:
                self._runs = [(self.shards[0], slice(0, self.n))]
            return
        # each shard's rows are one run, bounded by one search of the shard starts among the rows
        cuts = np.searchsorted(idx, starts)
        counts = cuts[1:] - cuts[:-1]
        bounds = cuts.tolist()
        self.sorted = True
        self.shards = counts.nonzero()[0].tolist()
        self._runs = [(s, slice(bounds[s], bounds[s + 1])) for s in self.shards]
        self.shard = np.repeat(np.arange(len(counts)), counts)
        self.local = idx - starts[self.shard]

    @property
    def runs(self) -> list[tuple[int, np.ndarray | slice]]:
        """Each touched shard and the output positions of its rows (a slice where they are adjacent)."""
        if self._runs is None:
            self._runs = [(s, self.order[pos]) for s, pos in self.by_row.runs]
        return self._runs

    @property
    def order(self) -> np.ndarray:
        """The output positions of the rows sorted (``by_row``'s rows in this plan's order)."""
        if self._order is None:
            self._order = np.argsort(self.idx)
        return self._order

    @property
    def by_row(self) -> Plan:
        """The plan of the same rows sorted (this plan, where they are)."""
        if self.sorted:
            return self
        if self._by_row is None:
            self._by_row = Plan(self.idx[self.order], self.starts, True)
        return self._by_row


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
    of the rows' views (one copy each); the rest are gathered sorted into a scratch array, then put
    in place by one scatter.
    """
    if plan.sorted:
        for shard, pos in plan.runs:
            # rows are in range (checked by the Store), so mode="clip" changes nothing; "raise" would buffer
            views[shard].data.take(plan.local[pos], axis=0, out=out[pos], mode="clip")
        return
    if take_across(views, plan, out):
        return
    sources = {s: views[s].data for s in plan.shards}
    if out.nbytes >= VIEW_ROW_BYTES * plan.n and all(a.flags.c_contiguous for a in (out, *sources.values())):
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


def take_across(views: Mapping[int, ColumnView], plan: Plan, out: np.ndarray) -> bool:
    """Rows of ``plan`` from the shards' arrays (``views``) into ``out`` with one ``np.take``.

    The shards lie at different addresses. Seen as one array of ``g``-byte elements running from
    the lowest shard's first row to the end of the highest shard, where ``g`` divides the row size
    and every distance between two shards' first rows, each row is ``row_bytes // g`` consecutive
    elements; one take of those elements, in the plan's order, fills ``out``. Only the indexed
    elements are read: the memory between shards is never touched (every row of the plan lies below
    its shard's row count, each shard's array is checked to hold that many rows here, and the shards
    stay mapped during the gather). False, with nothing done, for a sorted plan (one take per shard
    serves it), where an array is not contiguous or shorter than its shard, or a row would be more
    than :data:`MAX_PIECES` elements.
    """
    if plan.sorted or not plan.n or not out.flags.c_contiguous:
        return False
    row_bytes, starts = out.nbytes // plan.n, plan.starts
    ptrs, top = [], 0
    for s in plan.shards:
        view = views[s]
        a = view.data
        if not (a.flags.c_contiguous and a.dtype == out.dtype and a.shape[1:] == out.shape[1:]):
            return False
        if len(a) < starts[s + 1] - starts[s]:
            return False
        ptrs.append(view.address)
        top = max(top, view.address + a.nbytes)
    span, first = _layout(row_bytes, tuple(plan.shards), tuple(ptrs), top, len(starts) - 1)
    pieces = row_bytes // span.itemsize
    if not 0 < pieces <= MAX_PIECES:
        return False
    at = plan.local * pieces + first[plan.shard]
    if pieces > 1:
        at = np.add.outer(at, np.arange(pieces)).reshape(-1)
    np.take(span, at, out=out.reshape(-1).view(span.dtype), mode="clip")
    return True


@functools.lru_cache(maxsize=16)
def _layout(
    row_bytes: int, shards: tuple[int, ...], ptrs: tuple[int, ...], top: int, num_shards: int
) -> tuple[np.ndarray, np.ndarray]:
    """For :func:`take_across`: the span from the lowest of ``ptrs`` to ``top`` as elements of ``g``
    bytes (the greatest divisor of ``row_bytes`` and of the distances between the shards), and each
    shard's first element (length ``num_shards``). A function of addresses alone, so kept for the
    next batches of the same shards (whatever is mapped there when a gather reads it is what a fresh
    span would read)."""
    base = min(ptrs)
    size = math.gcd(row_bytes, *(p - base for p in ptrs))
    span = np.asarray(_Span(base, (top - base) // size, size))
    first = np.zeros(num_shards, dtype=np.int64)
    first[list(shards)] = [(p - base) // size for p in ptrs]
    first.flags.writeable = False
    return span, first


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
