"""The doctor's records: what the instrumented processes tell the analysis, and their wire format.

Events (one per line of the table below) and the descriptions they carry are frozen
dataclasses. :func:`to_wire` and :func:`from_wire` are the one place that turns them into the
JSON-lines wire format and back; :func:`encode_line` / :func:`decode_line` do it for a whole
line. The wire form of an event is a JSON list, the record's tag and then its fields in
declaration order; a nested record (a :class:`LoaderDesc`, a :class:`BatchDesc`) is a JSON
object keyed by field name::

    ["loader", loader, {LoaderDesc}]                a loader seen for the first time
    ["step", loader, requested, ready]              one batch handed out (data wait = ready - requested)
    ["stage", loader, stage, thread, start, end, items]    one pipeline stage of one batch or chunk
    ["batch", loader, {BatchDesc}]                  dtypes, shapes, padding of an inspected batch
    ["probe", dataset, random, index]               __getitem__(index) called twice: outputs differ?
    ["tune", loader, at, action, workers, prefetch, wait_share, rate, busy, reason]   an online-tuning decision
    ["worker", loader, worker, workers]             a DataLoader worker process's first fetch call (its id of workers)
    ["iter", loader, start, end]                    an iterator made over a loader (an epoch start: workers started)
    ["device", loader, start, end, h2d, blocking, pageable, nbytes, copy_s, syncs, sync_s, ops]   CUDA copies and syncs of one step
    ["meta", pid, ppid, start, end, argv, forked, rank, cost_s]    the process (fields unknown yet are null)

A line is a JSON list of such events. Times are ``time.perf_counter()`` seconds.

On the hot path an instrumented process does not build the record: it appends the tuple
``(RecordClass, *field values)`` (:class:`Step` and :class:`StageSpan`), which
:func:`to_wire` takes as it takes the record itself. :func:`to_wire` reads only class
attributes of what it is given, so it also takes records of a copy of this module loaded by
path (``child.py`` loads this file that way, before the script imports stoker).

This module uses the standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class LoaderDesc:
    """A data loader, a torch ``DataLoader`` or a ``stoker.Loader``, as the doctor reports it.

    The fields after ``kind`` mean what the fields of the same name of :class:`stoker.LoaderInfo` mean.

    Attributes:
        kind: ``"torch"``, ``"stoker"``, or ``"unknown"`` (a loader built before the doctor started).
        name: a label for reports, e.g. ``"DataLoader(MyDataset)"``.
        source: the qualified type name of the Dataset or batch source ("" when unknown).
        source_id: ``id()`` of the Dataset or source; torch's fetcher stages are keyed by it.
        engine: where the per-batch reading runs with workers: ``"threads"`` or ``"processes"``.
        num_workers: workers reading (0: the consumer's thread).
        batch_size: rows per batch, or None when a batch sampler decides.
        prefetch_factor: batches (stoker: chunks) in flight per worker, or None (torch without workers).
        pin_memory: whether host batches are staged in pinned memory.
        device: where batches land (None: the loader does not move them).
        store: whether the source reads a memory-mapped stoker store.
        persistent_workers: whether workers live across epochs (None: not known).
        schedule: a stoker loader's schedule in words, who set each setting ("" for torch's).
        variable: the name the script binds the loader to where the doctor saw it ("" if none).
        dataset_ref: ``module:attribute`` that ``stoker convert dataset`` can import to get the
            Dataset ("" when none was found; see ``dataset_note``).
        dataset_note: what to know before importing ``dataset_ref``, or why there is none.
        image_root: the folder of image files the Dataset reads ("" when none was found).
        random_transforms: class names of random transforms among the Dataset's attributes.
        transforms: the Dataset's image transforms as ``stoker.vision`` code ("" when none were found or
            one has no stoker counterpart; ``transform_facts.py``).
        transforms_left: the class names of its transforms that code leaves out.
        collate: the name of a torch DataLoader's own ``collate_fn`` ("" for torch's default one).
    """

    kind: str
    name: str
    source: str = ""
    source_id: int = -1
    engine: str | None = None
    num_workers: int = 0
    batch_size: int | None = None
    prefetch_factor: int | None = None
    pin_memory: bool = False
    device: str | None = None
    store: bool = False
    persistent_workers: bool | None = None
    schedule: str = ""
    variable: str = ""
    dataset_ref: str = ""
    dataset_note: str = ""
    image_root: str = ""
    random_transforms: tuple[str, ...] = ()
    transforms: str = ""
    transforms_left: str = ""
    collate: str = ""

    @classmethod
    def from_info(cls, info: Any) -> LoaderDesc:
        """The description of a stoker loader from its :class:`stoker.LoaderInfo`."""
        shared = {f.name: getattr(info, f.name) for f in fields(cls) if hasattr(info, f.name)}
        return cls(kind="stoker", **shared)

    @classmethod
    def unknown(cls) -> LoaderDesc:
        return cls(kind="unknown", name="a loader created before doctor started")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoaderDesc:
        """From its JSON object; keys this version does not know are dropped."""
        names = {f.name for f in fields(cls)}
        known: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in names}
        return cls(**known)


@dataclass(frozen=True)
class TensorDesc:
    """One tensor of an inspected batch: where it sits in the batch, its dtype, shape and device."""

    path: str
    dtype: str
    shape: tuple[int, ...]
    device: str


@dataclass(frozen=True)
class BatchDesc:
    """What an inspected batch holds: its type, its first tensors, and its padding share (or None)."""

    type: str
    tensors: tuple[TensorDesc, ...] = ()
    padding: float | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchDesc:
        tensors = tuple(TensorDesc(t["path"], t["dtype"], tuple(t["shape"]), t["device"]) for t in d.get("tensors", ()))
        return cls(d["type"], tensors, d.get("padding"))


@dataclass(frozen=True, slots=True)
class _OfLoader:
    """The first field of every event but :class:`Meta`: ``loader``, the loader's ``id()``."""

    loader: int


@dataclass(frozen=True)
class LoaderSeen(_OfLoader):
    """A loader seen for the first time in this process."""

    TAG: ClassVar[str] = "loader"
    info: LoaderDesc


@dataclass(frozen=True, slots=True)  # slots: a long run holds millions
class Step(_OfLoader):
    """One batch handed out by a loader: asked for at ``requested``, got at ``ready``."""

    TAG: ClassVar[str] = "step"
    requested: float
    ready: float


@dataclass(frozen=True, slots=True)  # slots: a long run holds millions
class StageSpan(_OfLoader):
    """One pipeline stage of one batch (or chunk of batches), run by ``thread``.

    ``loader`` is the loader's ``id()``; for the stages timed inside torch's dataset fetcher
    (``fetch``, ``collate``) it is the Dataset's ``id()`` (a loader's ``LoaderDesc.source_id``).
    ``items`` is how many samples the span handled where that is known (a ``fetch``: the
    ``__getitem__`` calls of one batch), else 1.
    """

    TAG: ClassVar[str] = "stage"
    stage: str
    thread: int
    start: float
    end: float
    items: int = 1

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class BatchSeen(_OfLoader):
    """A batch handed out by ``loader`` and looked at."""

    TAG: ClassVar[str] = "batch"
    batch: BatchDesc


@dataclass(frozen=True)
class Probe(_OfLoader):
    """``__getitem__(index)`` of the Dataset ``loader`` (its ``id()``) called twice in a row.

    ``random``: True when the two outputs differ (the Dataset draws at random, e.g. crops),
    False when equal, None when it raised or the outputs cannot be compared.
    """

    TAG: ClassVar[str] = "probe"
    random: bool | None
    index: int


@dataclass(frozen=True)
class Tuned(_OfLoader):
    """A decision of a stoker loader's online tuner (``num_workers="auto"``), at ``at``: the fields of
    its :class:`stoker.pipeline.autotune.Decision` (``since_start`` left out)."""

    TAG: ClassVar[str] = "tune"
    at: float
    action: str
    workers: int
    prefetch: int
    wait_share: float
    rate: float
    busy: float
    reason: str

    @classmethod
    def of(cls, loader: int, decision: Any) -> Tuned:
        names = [f.name for f in fields(cls)][1:]
        return cls(loader, *(getattr(decision, n) for n in names))


@dataclass(frozen=True)
class WorkerSeen(_OfLoader):
    """A torch DataLoader worker process (``worker`` of ``workers``) asked for its first batch of
    the Dataset ``loader`` (its ``id()``); one per worker process, so re-forks each epoch count."""

    TAG: ClassVar[str] = "worker"
    worker: int
    workers: int


@dataclass(frozen=True)
class IterStart(_OfLoader):
    """``iter(loader)``: the iterator's construction from ``start`` to ``end`` (worker processes start there)."""

    TAG: ClassVar[str] = "iter"
    start: float
    end: float


@dataclass(frozen=True)
class DeviceStep(_OfLoader):
    """The loop thread's CUDA work from a batch of ``loader`` handed out (``start``) to the next fetch
    (``end``), as ``copies.py`` counts it: ``h2d`` host-to-device copies, ``blocking`` of them without
    ``non_blocking=True``, ``pageable`` of them from memory not pinned, ``nbytes`` and ``copy_s`` seconds
    in them; ``syncs`` calls that wait for the device, ``sync_s`` seconds in them, ``ops`` their names."""

    TAG: ClassVar[str] = "device"
    start: float
    end: float
    h2d: int
    blocking: int
    pageable: int
    nbytes: int
    copy_s: float
    syncs: int
    sync_s: float
    ops: tuple[str, ...] = ()


@dataclass(frozen=True)
class Meta:
    """Facts about the recording process; a process writes several, each with what it knows then.

    Attributes:
        pid, ppid: the process and its parent.
        start, end: when recording started and ended in it.
        argv: the script's command line.
        forked: whether the process was forked from a recording one (a worker).
        rank: the process's ``RANK`` under torchrun (None: not a distributed rank).
        cost_s: seconds the process spent encoding and writing its events, at its end.
    """

    TAG: ClassVar[str] = "meta"
    pid: int | None = None
    ppid: int | None = None
    start: float | None = None
    end: float | None = None
    argv: tuple[str, ...] | None = None
    forked: bool = False
    rank: int | None = None
    cost_s: float | None = None

    def merged(self, later: Meta) -> Meta:
        """This record updated with what ``later`` knows (its fields that are set)."""
        known = {k: v for k, v in asdict(later).items() if v is not None and v is not False}
        return Meta(**{**asdict(self), **known})


Event = LoaderSeen | Step | StageSpan | BatchSeen | Probe | Tuned | WorkerSeen | IterStart | DeviceStep | Meta
RECORDS: dict[str, type] = {
    cls.TAG: cls
    for cls in (LoaderSeen, Step, StageSpan, BatchSeen, Probe, Tuned, WorkerSeen, IterStart, DeviceStep, Meta)
}
# the nested records, by the name a field declares them with (annotations are strings here)
_NESTED: dict[str, Callable[[dict[str, Any]], Any]] = {
    "LoaderDesc": LoaderDesc.from_dict,
    "BatchDesc": BatchDesc.from_dict,
}


_SCALARS = frozenset({int, float, str, bool, type(None)})
_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode  # events hold no cycles


def _plain(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def _from_json(declared: Any, value: Any) -> Any:
    """A field's value from its JSON: an object is the nested record ``declared``, a list a tuple."""
    if isinstance(value, dict):
        return _NESTED[declared](value)
    return tuple(value) if isinstance(value, list) else value


def as_json(record: Any) -> dict[str, Any]:
    """A record as the JSON object it is on the wire and in ``report.json`` (tuples as lists)."""

    def plain(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(asdict(record))


def to_wire(event: Any) -> list[Any]:
    """The JSON-able list of an event: a record, or ``(RecordClass, *field values)`` (scalars only)."""
    if isinstance(event, tuple):
        return [event[0].TAG, *event[1:]]
    return [event.TAG, *(_plain(getattr(event, f.name)) for f in fields(event))]


_SCALAR_NAMES = frozenset({"int", "float", "str", "bool", "None"})


def _declared(cls: type) -> tuple[str, ...] | None:
    """The declared types of a record's fields, or None when each is a scalar or a union of scalars (its
    JSON values are its fields as they are); any other field (a tuple, a nested record) is decoded."""
    types = tuple(str(f.type) for f in fields(cls))  # strings: this module postpones annotations
    scalar = all({part.strip() for part in t.split("|")} <= _SCALAR_NAMES for t in types)
    return None if scalar else types


_DECLARED = {tag: (cls, _declared(cls)) for tag, cls in RECORDS.items()}


def from_wire(item: list[Any]) -> Event:
    """The record of a wire event; ``ValueError`` for a tag this version does not know."""
    cls, declared = _DECLARED.get(item[0], (None, None)) if item else (None, None)
    if cls is None:
        raise ValueError(f"not a doctor event: {item!r:.200}")
    values = item[1:]
    if declared is not None:
        values = [_from_json(t, v) for t, v in zip(declared, values)] + values[len(declared) :]
    return cls(*values)  # more values than fields: the TypeError of a foreign event


def encode_line(events: Iterable[Any]) -> str:
    """One line of the events file (with its newline)."""
    return _encode([to_wire(e) for e in events]) + "\n"


def decode_line(line: str) -> list[Event]:
    """The records of one line; ``ValueError`` for a torn or foreign line."""
    return [from_wire(item) for item in json.loads(line)]
