"""Samples of a torch Dataset turned into column batches, with their schema checked per sample.

A sample may be a tensor, a numpy array, a number, a str, bytes, a flat list of numbers, or
a dict / tuple of these (nested). Its *fields* are its leaves, named by their path: dict keys
(``"image"``, nested ``"meta.id"``), tuple positions (``"0"``, ``"1"``, or the ``names`` given
for a top-level tuple), ``"value"`` for a bare value. ``columnize`` runs in the worker
process on one batch of samples and returns columns ready for ``StoreWriter.add_batch``.
"""

from __future__ import annotations

import hashlib
import pickle
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import SchemaError
from stoker.store.columns import as_array, infer_from_sample
from stoker.store.format import Column

_NUMBER = (bool, int, float, np.generic)


def _is_structure(value: Any) -> bool:
    if isinstance(value, tuple):
        return True
    # a list of numbers is a value (a sequence); a list holding arrays, dicts or text is a structure
    return isinstance(value, list) and any(not isinstance(v, _NUMBER) for v in value)


def sample_fields(sample: Any, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The leaves of one sample, by field name."""
    out: dict[str, Any] = {}

    def walk(value: Any, path: str, top: bool) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k), False)
        elif _is_structure(value):
            for i, v in enumerate(value):
                name = names[i] if top and names is not None and i < len(names) else str(i)
                walk(v, f"{path}.{name}" if path else name, False)
        else:
            key = path or (names[0] if names else "value")
            out[key] = value

    walk(sample, "", True)
    return out


def describe(col: Column) -> str:
    if col.kind == "tensor":
        return f"{col.dtype} of shape {col.shape}" if col.shape else f"a {col.dtype} number"
    if col.kind == "sequence":
        return f"a variable-length sequence of {col.dtype}"
    return "bytes" if col.kind == "binary" else "a str"


def compatible(have: Column | None, got: Column) -> bool:
    """Whether a value inferred as ``got`` can go into a column declared or inferred as ``have`` (None: no column)."""
    if have is None:
        return False
    if have.kind == "sequence":
        ok_kind = got.kind == "sequence" or (got.kind == "tensor" and len(got.shape or ()) == 1)
        return ok_kind and np.can_cast(got.numpy_dtype, have.numpy_dtype, "same_kind")
    if have.kind != got.kind:
        return False
    if have.kind == "tensor":
        return have.shape == got.shape and np.can_cast(got.numpy_dtype, have.numpy_dtype, "same_kind")
    return True


def check_fields(index: int, schema: Mapping[str, Column], got: Mapping[str, Column], since: int | None) -> None:
    """A SchemaError when the fields ``got`` of dataset[index] do not fit ``schema`` (set by dataset[since];
    None: by earlier samples): a field missing, a field more, or a value of another kind, dtype or shape."""
    for name in {**schema, **got}:
        if name not in got or not compatible(schema.get(name), got[name]):
            raise conflict(index, name, schema.get(name), got.get(name), since)


def conflict(index: int, name: str, have: Column | None, got: Column | None, since: int | None) -> SchemaError:
    """The error for a sample whose field does not fit the schema so far (set by dataset[since])."""
    earlier = "earlier samples" if since is None else f"the samples from dataset[{since}]"
    if have is None:
        return SchemaError(f"dataset[{index}] has a field {name!r} that {earlier} lack", row=index, column=name)
    if got is None:
        return SchemaError(f"dataset[{index}] has no field {name!r}, which {earlier} have", row=index, column=name)
    hint = ""
    if have.kind == "tensor" and got.kind == "tensor" and len(have.shape or ()) == len(got.shape or ()) == 1:
        hint = f"; if its length varies, pass schema={{{name!r}: stoker.Sequence({have.dtype!r})}}"
    return SchemaError(
        f"dataset[{index}] field {name!r} is {describe(got)}, but {earlier} have {describe(have)}{hint}",
        row=index,
        column=name,
    )


def infer(name: str, value: Any, index: int) -> Column:
    """The column one value implies; a SchemaError naming the sample when it cannot be stored."""
    try:
        return infer_from_sample(name, value)
    except SchemaError as exc:
        raise SchemaError(f"dataset[{index}]: {exc}", row=index, column=name) from None


@dataclass(frozen=True)
class Failure:
    """A sample whose ``__getitem__`` raised: what travels back from the worker."""

    index: int
    type_name: str
    message: str
    traceback: str
    pickled: bytes | None

    @classmethod
    def of(cls, index: int, exc: Exception) -> Failure:
        try:
            pickled: bytes | None = pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an unpicklable exception still travels as text
            pickled = None
        return cls(index, type(exc).__name__, str(exc), traceback.format_exc(), pickled)

    def light(self) -> Failure:
        """This failure without its traceback and pickled exception (for counting skipped samples)."""
        return Failure(self.index, self.type_name, self.message[:200], "", None)

    def exception(self) -> BaseException | None:
        if self.pickled is None:
            return None
        try:
            return pickle.loads(self.pickled)
        except Exception:  # noqa: BLE001 - fall back to the text
            return None


@dataclass(frozen=True)
class Guarded:
    """A Dataset whose ``__getitem__`` returns ``(index, sample)`` or ``(index, Failure)``."""

    dataset: Any

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> tuple[int, Any]:
        try:
            return index, self.dataset[index]
        except Exception as exc:  # noqa: BLE001 - reported per index, raised or skipped by the consumer
            return index, Failure.of(index, exc)


@dataclass(frozen=True)
class Columnize:
    """The worker-side collate: samples -> ``{"index", "failed", "columns", "schema"}``.

    ``columns`` holds one stacked array per fixed-shape field and a list per other field;
    ``schema`` is the batch's column types (``declared`` ones win). A sample whose fields do
    not fit the batch's first sample raises SchemaError naming its index and field.
    """

    names: tuple[str, ...] | None = None
    declared: Mapping[str, Column] | None = None

    def __call__(self, items: list[tuple[int, Any]]) -> dict[str, Any]:
        failed = [payload for _, payload in items if isinstance(payload, Failure)]
        failed = failed[:1] + [f.light() for f in failed[1:]]  # one traceback per batch is enough
        good = [(i, sample_fields(s, self.names)) for i, s in items if not isinstance(s, Failure)]
        if not good:
            return {"index": np.empty(0, np.int64), "failed": failed, "columns": {}, "schema": {}}
        first, fields = good[0]
        declared = self.declared or {}
        schema = {name: declared.get(name) or infer(name, v, first) for name, v in fields.items()}
        values: dict[str, list[Any]] = {name: [] for name in schema}
        for index, fields in good:
            check_fields(index, schema, {name: infer(name, v, index) for name, v in fields.items()}, first)
            for name, v in fields.items():
                values[name].append(v)
        columns: dict[str, Any] = {}
        for name, col in schema.items():
            vals = values[name]
            if col.kind == "tensor":
                columns[name] = np.stack([as_array(v) for v in vals])  # the writer casts, checking ranges
            elif col.kind == "sequence":
                rows = [np.asarray(as_array(v)).reshape(-1) for v in vals]
                columns[name] = [r if r.size else np.empty(0, col.numpy_dtype) for r in rows]  # [] is float64 to numpy
            else:
                columns[name] = [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in vals]
        return {
            "index": np.array([i for i, _ in good], dtype=np.int64),
            "failed": failed,
            "columns": columns,
            "schema": schema,
        }


def fingerprint(dataset: Any, names: Sequence[str] | None = None, picks: int = 4) -> dict[str, str | None]:
    """Content hashes of a few samples: index -> hash of its collated bytes, or None.

    The first and the last index and ``picks`` more chosen by a generator seeded with the
    length are read twice and collated as the conversion does; a sample that raises, or whose
    two reads differ (random augmentation), hashes to None and is not compared. The converter
    calls this in a worker process when it has workers (``from_dataset._Task``), so a file the
    dataset opens in ``__getitem__`` is never open in the process that forks them.
    """
    n = len(dataset)
    chosen = {0, n - 1, *np.random.default_rng(n).integers(0, n, size=picks).tolist()}
    collate = Columnize(tuple(names) if names else None)
    guarded = Guarded(dataset)
    out: dict[str, str | None] = {}
    for index in sorted(chosen):
        digests = {_digest(collate([guarded[index]])) for _ in range(2)}
        out[str(index)] = digests.pop() if len(digests) == 1 else None
    return out


def _digest(batch: dict[str, Any]) -> str | None:
    if batch["failed"]:
        return None
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(batch["columns"]):
        h.update(f"{name}:{batch['schema'][name].to_json()}".encode())
        values = batch["columns"][name]
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str):
                h.update(value.encode())
            elif isinstance(value, bytes):
                h.update(value)
            else:
                arr = np.ascontiguousarray(value)
                h.update(f"{arr.dtype.str}{arr.shape}".encode())
                h.update(arr.tobytes())
    return h.hexdigest()
