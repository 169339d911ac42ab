"""The stall classes users hit beyond a slow ``__getitem__``, each found from recorded facts.

Each finder looks at one loader's :class:`LoaderStats` (and the resource samples) and returns
at most one :class:`Stall`: its class (``kind``), a verdict line with its numbers, and the
change for a torch DataLoader and for stoker. A finder names nothing unless its evidence is
counted (batches per worker, processes forked) or far beyond noise (a threshold in MiB or a
share of the loop together with an absolute floor).

- ``idle_workers``: a DataLoader's worker produced no batch, or one worker produced most of them
  (an IterableDataset with fewer shards than ``num_workers``).
- ``worker_memory``: worker processes' private memory (USS) grows while they run: Python objects of
  a forked Dataset copied on access (reference counts write to their pages).
- ``shm``: ``torch_shm_manager`` processes or ``/dev/shm`` entries piling up.
- ``slow_starts``: the time from ``iter(loader)`` to its first batch, per epoch, against the loop
  (worker start-up; workers forked again each epoch without ``persistent_workers``).
- ``python_collate``: a ``collate_fn`` that takes most of a fetch (padding in Python, per sample).
- ``raw_text``: batches hold Python strings, so the training loop's thread tokenizes or decodes them.
- ``copies``: the loop's host-to-device copies block (no ``non_blocking=True``) or come from pageable
  memory (``pin_memory=False``) in half the steps watched (``copies.py``: CUDA only).
- ``syncs``: the loop waits for the device (``.item()``, ``.cpu()``, ``.tolist()``...) in half the steps watched.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from statistics import median
from typing import Any

from stoker.doctor.analysis import LoaderStats

MIB = 2**20
GROWTH_MIB = 32  # a worker's USS growth from which its memory counts as growing
START_SHARE, START_FLOOR_S = 0.2, 1.0  # epoch starts: share of the loop and seconds, both needed
COLLATE_SHARE, COLLATE_FLOOR_S = 0.7, 0.3
SHM_FILES, SHM_MANAGERS = 256, 2
WATCHED_MIN = 8  # steps of CUDA copies and syncs watched before either class is judged


@dataclass
class Stall:
    """One stall class found in one loader: what, the numbers, and the change for each loader kind."""

    kind: str
    loader: str
    verdict: str
    torch_fix: str
    stoker_fix: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _convert(st: LoaderStats) -> str:
    ref = st.info.dataset_ref or "MODULE:ATTRIBUTE"
    return f"stoker convert dataset {ref} stores/train"


def idle_workers(st: LoaderStats) -> Stall | None:
    """Batches per worker id (summed over epochs): a worker with none, or one with most, while there were plenty."""
    n = st.info.num_workers
    if st.info.kind != "torch" or n < 2:
        return None
    made: dict[int, int] = defaultdict(int)
    for w in st.workers.values():
        if w.worker >= 0:
            made[w.worker] += w.batches
    total = sum(made.values())
    if total < 2 * n:  # too few batches to expect every worker to get one
        return None
    counts = [made.get(i, 0) for i in range(n)]
    idle = [i for i, c in enumerate(counts) if c == 0]
    top = max(range(n), key=lambda i: counts[i])
    if not idle and counts[top] < 0.75 * total:
        return None
    each = ", ".join(f"worker {i}: {c}" for i, c in enumerate(counts))
    what = (
        f"{len(idle)} of {n} workers produced no batch" if idle else f"worker {top} produced {counts[top]} of {total}"
    )
    busy = [w.busy_s for w in st.workers.values() if w.worker == top]
    iterable = "an IterableDataset gives each worker what its __iter__ yields there: fewer shards than workers"
    return Stall(
        "idle_workers",
        st.name,
        f"idle workers: {what} batches ({each}; worker {top} busy {sum(busy):.2f} s); {iterable} leaves the rest idle",
        f"split the rows, not the shards, by worker in __iter__: info = torch.utils.data.get_worker_info(); "
        f"yield from rows[info.id::info.num_workers] (HF datasets: to_iterable_dataset(num_shards=k*{n})); "
        f"or num_workers={max(1, n - len(idle))}",
        f"once: {_convert(st)}; then stoker.Loader('stores/train', num_workers={n}): a store is split into "
        "chunks handed to whichever worker is free, so every worker gets work",
    )


def _worker_uss(st: LoaderStats, samples: list[dict[str, Any]]) -> dict[int, list[int]]:
    pids = set(st.workers)
    series: dict[int, list[int]] = defaultdict(list)
    for s in samples:
        for row in s.get("mem", ()):
            if row[0] in pids and row[1] is not None:
                series[int(row[0])].append(int(row[1]))
    return {pid: v for pid, v in series.items() if len(v) >= 2}


def worker_memory(st: LoaderStats, samples: list[dict[str, Any]]) -> Stall | None:
    """Workers whose private memory grew by ``GROWTH_MIB`` or more while they ran (at least half of them)."""
    series = _worker_uss(st, samples)
    if not series:
        return None
    growth = {pid: max(v) - v[0] for pid, v in series.items()}
    grown = [pid for pid, g in growth.items() if g >= GROWTH_MIB * MIB]
    if 2 * len(grown) < len(growth):
        return None
    most = max(growth.values())
    top = max(max(v) for v in series.values())
    return Stall(
        "worker_memory",
        st.name,
        f"memory grows in workers: {len(grown)} of {len(growth)} worker processes grew their private memory (USS) "
        f"by {median(growth[p] for p in grown) / MIB:.0f} MiB (median; up to {most / MIB:.0f} MiB, {top / MIB:.0f} MiB "
        f"at most) while they ran: the Dataset's Python objects (lists of dicts or strings) are copied on access in "
        f"each forked worker, {len(grown)}x their size",
        "keep the Dataset's data in numpy arrays or one Arrow table, not a list of Python objects "
        "(np.array(strings, dtype='S') or an offsets+bytes pair; pandas/pyarrow columns), so workers read shared pages",
        f"once: {_convert(st)}; then stoker.Loader('stores/train', ...): a memory-mapped store shares its pages "
        "with every worker",
    )


def shm(samples: list[dict[str, Any]], name: str) -> Stall | None:
    """``torch_shm_manager`` processes (``SHM_MANAGERS`` or more) or ``/dev/shm`` entries growing by ``SHM_FILES``."""
    files = [s["shm_files"] for s in samples if "shm_files" in s]
    managers = max((s.get("shm_managers", 0) for s in samples), default=0)
    grew = files[-1] - files[0] if files else 0
    if managers < SHM_MANAGERS and grew < SHM_FILES:
        return None
    size = max((s.get("shm_bytes", 0) for s in samples), default=0)
    return Stall(
        "shm",
        name,
        f"shared memory piles up: {managers} torch_shm_manager processes, /dev/shm grew by {grew} entries "
        f"(up to {size / MIB:.0f} MiB)",
        "torch.multiprocessing.set_sharing_strategy('file_descriptor') (the file_system strategy leaves files "
        "and a torch_shm_manager per process); do not keep batches from workers alive across steps",
        "stoker.Loader(..., num_workers=N) with worker processes writes into a fixed set of shared batch slots, "
        "recycled, and sweeps them when its consumer is gone",
    )


def slow_starts(st: LoaderStats, loop_s: float) -> Stall | None:
    """Per ``iter(loader)``: its construction plus the first batch's wait, beyond an ordinary step or the
    making of one batch (whichever is longer: the first batch of an epoch is made while nothing overlaps it)."""
    if not st.iters or len(st.steps) < 2 or loop_s <= 0:
        return None
    starts: list[float] = []
    firsts: set[int] = set()
    for t0, t1 in st.iters:
        i = next((i for i, s in enumerate(st.steps) if s.requested >= t1), None)
        if i is not None:
            firsts.add(i)
            starts.append((t1 - t0) + st.steps[i].wait)
    rest = [s.wait + s.compute_before for i, s in enumerate(st.steps) if i not in firsts]
    fetches = st.stages.get("fetch") or st.stages.get("read") or [0.0]
    typical = max(median(rest) if rest else 0.0, median(fetches))  # a first batch is made before it is waited for
    extra = sum(max(0.0, x - typical) for x in starts)
    if extra < START_FLOOR_S or extra < START_SHARE * loop_s:
        return None
    forks = len(st.workers)
    info = st.info
    refork = not info.persistent_workers and info.num_workers > 0 and len(starts) > 1
    again = (
        f"; {forks} worker processes were started for num_workers={info.num_workers}: forked again each epoch"
        if refork
        else ""
    )
    persistent = "persistent_workers=True, " if refork else ""
    return Stall(
        "slow_starts",
        st.name,
        f"slow epoch starts: {len(starts)} epoch starts took {sum(starts):.2f} s before their first batch "
        f"({max(starts):.2f} s at most, against {1000 * typical:.1f} ms for an ordinary step or batch), "
        f"{100 * extra / loop_s:.0f} % of the loop{again}",
        f"DataLoader(..., {persistent}num_workers={info.num_workers or 2}); move one-off set-up (opening files, "
        "loading indexes, worker_init_fn work) into the Dataset's __init__ or do it lazily once per worker",
        f"stoker.Loader(..., num_workers={info.num_workers or 2}, persistent_workers=True): its workers are "
        "started once and serve every epoch; a store needs no per-worker set-up",
    )


def python_collate(st: LoaderStats) -> Stall | None:
    """A torch loader's own ``collate_fn`` (not torch's default) taking ``COLLATE_SHARE`` of its fetches' time
    and ``COLLATE_FLOOR_S`` in all."""
    fetch, collate = sum(st.stages.get("fetch", ())), sum(st.stages.get("collate", ()))
    if (
        st.info.kind != "torch"
        or not st.info.collate
        or not fetch
        or collate < COLLATE_FLOOR_S
        or collate < COLLATE_SHARE * fetch
    ):
        return None
    calls = len(st.stages["collate"])
    where = "the training loop's thread" if not st.info.num_workers else f"{st.info.num_workers} workers"
    return Stall(
        "python_collate",
        st.name,
        f"collate_fn in Python: {st.info.collate} takes {1000 * collate / calls:.1f} ms per batch over {calls} batches, "
        f"{100 * collate / fetch:.0f} % of fetching, in {where}",
        "pad in one call per batch: torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True) or the tokenizer's "
        "padding=True on the whole batch, not a Python loop per sample",
        "stoker.text.Loader(texts, tokenizer=..., batch_size=...) pads each batch in numpy (dynamic padding); "
        "stoker.Loader over a store pads sequence columns in one pass per chunk",
    )


def raw_text(st: LoaderStats) -> Stall | None:
    """Inspected batches holding Python strings: the loop's own thread must turn them into tensors."""
    texts = [t for b in st.batches for t in b.tensors if t.dtype == "str"]
    if not texts:
        return None
    t = texts[0]
    return Stall(
        "raw_text",
        st.name,
        f"work in the training loop's thread: batches hold Python strings ({t.path}: {t.shape[0]} per batch), "
        "so tokenization or decoding runs in the loop, counted as compute, with no worker to help",
        "tokenize in the Dataset or a collate_fn, in workers (DataLoader(..., num_workers=N, "
        "collate_fn=lambda b: tokenizer([x for x in b], padding=True, return_tensors='pt')))",
        "stoker.text.Loader(texts, tokenizer='bert-base-uncased', batch_size=..., max_length=...): tokenized in "
        "batches off the loop's thread, or once: stoker convert text corpus.txt stores/text --tokenizer ...",
    )


def copies(st: LoaderStats) -> Stall | None:
    """Host-to-device copies of the loop that block or come from pageable memory, in half the steps watched."""
    recs = st.device
    bad = [r for r in recs if r.blocking or r.pageable]
    if len(recs) < WATCHED_MIN or 2 * len(bad) < len(recs):
        return None
    n, total = len(bad), sum(r.h2d for r in bad)
    blocking, pageable = sum(r.blocking for r in bad), sum(r.pageable for r in bad)
    nbytes, copy_s, step_s = sum(r.nbytes for r in bad), sum(r.copy_s for r in bad), sum(r.end - r.start for r in bad)
    torch_loader = st.info.kind == "torch"
    why = [f"{blocking} of {total} without non_blocking=True"] if blocking else []
    if pageable:
        unpinned = " (pin_memory=False)" if torch_loader and not st.info.pin_memory else ""
        why.append(f"{pageable} of {total} from pageable memory{unpinned}, staged through a driver buffer")
    rate = f", {nbytes / copy_s / 1e9:.1f} GB/s" if copy_s > 0 else ""
    pin = (
        "the batches are pinned already; "
        if torch_loader and st.info.pin_memory
        else "DataLoader(..., pin_memory=True) and "
    )
    return Stall(
        "copies",
        st.name,
        f"copies that do not overlap compute: in {n} of {len(recs)} steps watched the loop copies its batch to the GPU "
        f"and waits for the copy ({'; '.join(why)}): {total / n:.1f} copies and {nbytes / n / MIB:.2f} MiB per step, "
        f"{1000 * copy_s / n:.2f} ms per step in the copy calls{rate}, {100 * copy_s / max(step_s, 1e-9):.0f} % of the "
        "step",
        f"{pin}in the loop x = x.to(device, non_blocking=True) for each tensor of the batch: a copy from pinned memory "
        "is queued on the stream and the loop goes on, so it overlaps the GPU's work",
        'stoker.Loader(..., device="cuda", num_workers=2) and drop the loop\'s .to(): worker threads gather each batch '
        "into pinned, recycled buffers and start its copy on a side CUDA stream (non_blocking), so it overlaps the "
        "loop's compute, and the loop waits only for a copy not done yet (stage h2d_wait); with worker processes "
        "(engine='processes') the copy starts, from page-locked slots, when the loop takes the batch",
    )


def syncs(st: LoaderStats) -> Stall | None:
    """Calls of the loop that wait for the device (``.item()``, ``.cpu()``...), in half the steps watched."""
    recs = st.device
    hit = [r for r in recs if r.syncs]
    if len(recs) < WATCHED_MIN or 2 * len(hit) < len(recs):
        return None
    ops = sorted({o for r in hit for o in r.ops})
    wait, step = sum(r.sync_s for r in hit), sum(r.end - r.start for r in hit)
    timing = (
        "; time with torch.cuda.Event(enable_timing=True), read once at the end"
        if any("synchronize" in o for o in ops)
        else ""
    )
    return Stall(
        "syncs",
        st.name,
        f"device syncs in the loop: {len(hit)} of {len(recs)} steps watched call {', '.join(ops)} on a CUDA tensor "
        f"({sum(r.syncs for r in hit) / len(hit):.1f} per step, {1000 * wait / len(hit):.2f} ms per step waiting in "
        f"them, {100 * wait / max(step, 1e-9):.0f} % of the step): each waits until the GPU has run all it was given, "
        "so the loop cannot queue the next batch's copy and kernels ahead and the copy never overlaps compute",
        "read values on the host every N steps, not every step: keep sums on the device (total += loss.detach()) "
        "and call .item() when you log (if step % 100 == 0: print(total.item() / 100)); compute metrics with torch "
        f"ops on the device, not .cpu()/.tolist() per step{timing}",
        "the same change in the loop (a loader cannot undo a sync the loop makes); stoker.Loader(..., "
        'device="cuda") hands out batches already on the device, so the loop has no copy of its own to wait for',
    )


def find(loaders: dict[str, LoaderStats], samples: list[dict[str, Any]], loop_s: float) -> list[Stall]:
    """Every stall class found, per loader, then the run's shared memory."""
    found: list[Stall | None] = []
    for st in loaders.values():
        found += [
            idle_workers(st),
            worker_memory(st, samples),
            slow_starts(st, loop_s),
            python_collate(st),
            raw_text(st),
            copies(st),
            syncs(st),
        ]
    found.append(shm(samples, "the run"))
    return [s for s in found if s is not None]
