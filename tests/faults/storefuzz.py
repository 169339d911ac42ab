"""A fuzzer of stoker stores: damage a small store's files, open and read it, count what happens.

Each mutation changes one file of a clean copy of a small store (one byte flipped, the file cut
short, a byte inserted, or an edit of the manifest's JSON), then the store is opened and every
row read, once with ``verify=False`` and once with ``verify=True``. Outcomes:

================  ==============================================================================
``equal``         the rows read are the original rows
``wrong``         the rows read differ from the original ones, and nothing was raised
``stoker_error``  a StokerError was raised (the intended answer to a damaged store)
``other_error``   any other exception (a bug: ``details`` names the type)
``abort``         the reading process died (SIGABRT, SIGSEGV, ...): a bug
``hang``          no answer within the time limit: a bug
================  ==============================================================================

Mutations marked ``resigned`` also rewrite the manifest's sizes and checksums to match the damage
(a buggy writer, or an attacker), so that only the reader's structural checks stand between the
damage and the values; for them ``wrong`` under ``verify=True`` is possible and is counted apart.

Mutations run in child processes, a batch each; a child that dies costs one ``abort`` and the
next child goes on after the mutation that killed it. ``run(count, seed)`` is deterministic.
Used by ``tests/faults/test_fuzz_store.py`` (bounded) and ``benchmarks/fuzz_store.py`` (full length).
"""

from __future__ import annotations

import json
import os
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
SHARD = "shard-00000.arrow"
# a mutation (or a child's start, imports included) taking longer than this counts as a hang: generous,
# as a loaded machine can take minutes to import
HANG_S = 300.0


@dataclass(frozen=True)
class Mutation:
    """One change to one file of the store: ``op`` at ``pos`` of ``target`` (a file name)."""

    target: str
    op: str  # flip | truncate | insert | edit
    pos: int = 0
    value: int = 0
    edit: str = ""  # the name of a manifest edit (op "edit")
    resigned: bool = False


@dataclass
class Report:
    """Outcome counts: ``counts[(verify, resigned)][outcome]``; ``details`` names the bugs found."""

    mutations: int = 0
    counts: dict[str, Counter] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    def add(self, key: str, outcome: str, detail: str = "") -> None:
        self.counts.setdefault(key, Counter())[outcome] += 1
        if detail and len(self.details) < 50:
            self.details.append(detail)

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def as_json(self) -> dict[str, Any]:
        return {"mutations": self.mutations, "counts": {k: dict(v) for k, v in self.counts.items()}}


def make_store(path: Path) -> Path:
    """A small store of every column kind: 24 rows in 2 shards (the first about 3 KB)."""
    import stoker

    rng = np.random.default_rng(0)
    n = 24
    columns = {
        "image": rng.integers(0, 255, size=(n, 4), dtype=np.uint8),
        "label": np.arange(n, dtype=np.int64),
        "ids": [rng.integers(0, 1000, size=int(k), dtype=np.int32) for k in rng.integers(0, 6, size=n)],
        "blob": [bytes(rng.integers(0, 255, size=int(k), dtype=np.uint8)) for k in rng.integers(0, 9, size=n)],
        "text": [f"row {i} é" for i in range(n)],
    }
    return stoker.write(path, columns, shard_size=1000)


# -- manifest edits ----------------------------------------------------------------------------
def _deep(m: dict) -> Any:
    return "[" * 100_000 + "]" * 100_000


EDITS: dict[str, Any] = {
    "duplicate_shard": lambda m: m.update(
        shards=[m["shards"][0], *m["shards"]], num_rows=m["num_rows"] + m["shards"][0]["rows"]
    ),
    "swap_shards": lambda m: m.update(shards=m["shards"][::-1]),
    "shape_4_to_2x2": lambda m: m["columns"]["image"].update(shape=[2, 2]),
    "shape_2_40": lambda m: m["columns"]["image"].update(shape=[2**40]),
    "shape_negative": lambda m: m["columns"]["image"].update(shape=[-4]),
    "shape_string": lambda m: m["columns"]["image"].update(shape="4"),
    "dtype_int8": lambda m: m["columns"]["image"].update(dtype="int8"),
    "dtype_bogus": lambda m: m["columns"]["image"].update(dtype="float128x"),
    "dtype_object": lambda m: m["columns"]["image"].update(dtype="O"),
    "kind_sequence": lambda m: m["columns"]["ids"].update(kind="binary", dtype=None),
    "drop_column": lambda m: m["columns"].pop("blob"),
    "no_columns": lambda m: m.update(columns={}),
    "empty_shards": lambda m: m.update(shards=[], num_rows=0),
    "rows_negative": lambda m: m["shards"][0].update(rows=-1),
    "rows_float": lambda m: m["shards"][0].update(rows=1.5),
    "rows_string": lambda m: m["shards"][0].update(rows="12"),
    "rows_huge": lambda m: m["shards"][0].update(rows=10**30),
    "num_rows_huge": lambda m: m.update(num_rows=10**400),
    "bytes_null": lambda m: m["shards"][0].update(bytes=None),
    "file_parent": lambda m: m["shards"][0].update(file="../shard-00000.arrow"),
    "file_absolute": lambda m: m["shards"][0].update(file="/etc/passwd"),
    "file_missing": lambda m: m["shards"][0].update(file="shard-99999.arrow"),
    "file_number": lambda m: m["shards"][0].update(file=5),
    "checksum_number": lambda m: m["shards"][0].update(xxh3_128=5),
    "version_bool": lambda m: m.update(version=True),
    "version_3_keeps_checksum": lambda m: m.update(version=3),
    "version_3_no_checksum": lambda m: (m.update(version=3), m.pop("checksum", None)),
    "drop_own_checksum": lambda m: m.pop("checksum", None),
    "metadata_list": lambda m: m.update(metadata=[1, 2]),
    "metadata_deep": lambda m: m.update(metadata={"x": json.loads("[" * 500 + "]" * 500)}),
    "shards_object": lambda m: m.update(shards={"a": 1}),
    "manifest_list": lambda m: m.clear(),
}
TEXT_EDITS = {  # edits of the text rather than the object
    "deep_nesting": lambda text: "[" * 100_000 + "]" * 100_000,
    "duplicate_key": lambda text: text.replace('"num_rows"', '"num_rows": 0, "num_rows"', 1),
    "not_utf8": lambda text: text[:50] + "\udcff" + text[50:],
    "nan_rows": lambda text: text.replace('"rows": ', '"rows": NaN, "x": ', 1),
}


def plan(store: Path, count: int, seed: int) -> list[Mutation]:
    """``count`` mutations: first one flip of every byte of the first shard and of the manifest, every
    manifest edit (plain and resigned), then random flips, truncations and insertions (some resigned)."""
    rng = random.Random(seed)
    sizes = {name: (store / name).stat().st_size for name in (SHARD, MANIFEST)}
    out: list[Mutation] = []
    for name in (SHARD, MANIFEST):
        out += [Mutation(name, "flip", pos, rng.randrange(1, 256)) for pos in range(sizes[name])]
    for name in [*EDITS, *TEXT_EDITS]:
        out += [Mutation(MANIFEST, "edit", edit=name), Mutation(MANIFEST, "edit", edit=name, resigned=True)]
    while len(out) < count:
        name = rng.choice((SHARD, SHARD, SHARD, MANIFEST))
        op = rng.choice(("flip", "flip", "truncate", "insert"))
        resigned = name == SHARD and op != "flip" and rng.random() < 0.5 or name == SHARD and rng.random() < 0.2
        out.append(Mutation(name, op, rng.randrange(sizes[name]), rng.randrange(1, 256), resigned=resigned))
    return out[:count]


def apply(store: Path, originals: dict[str, bytes], m: Mutation) -> None:
    """Restore ``store``'s files to ``originals``, then make mutation ``m``."""
    for name, data in originals.items():
        (store / name).write_bytes(data)
    data = bytearray(originals[m.target])
    if m.op == "flip":
        data[m.pos] ^= m.value
    elif m.op == "truncate":
        del data[m.pos :]
    elif m.op == "insert":
        data[m.pos : m.pos] = bytes([m.value])
    elif m.edit in TEXT_EDITS:
        text = TEXT_EDITS[m.edit](data.decode("utf-8"))
        data = bytearray(text.encode("utf-8", "surrogateescape"))
    else:
        obj = json.loads(data)
        EDITS[m.edit](obj)
        data = bytearray(json.dumps(obj).encode())
    (store / m.target).write_bytes(bytes(data))
    if m.resigned:
        _resign(store)


def _resign(store: Path) -> None:
    """Make the manifest agree with the files as they are: sizes, shard checksums, its own checksum."""
    from stoker.store.format import manifest_checksum
    from stoker.store.shardfile import file_checksum

    try:
        obj = json.loads((store / MANIFEST).read_text())
        for entry in obj["shards"]:
            path = store / entry["file"]
            if path.is_file() and path.resolve().parent == store.resolve():
                entry["bytes"] = path.stat().st_size
                entry["xxh3_128"] = file_checksum(path, "xxh3_128")
        obj["checksum"] = {"xxh3_128": manifest_checksum(obj)}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError):
        return  # a manifest too broken to re-sign stays as it is
    (store / MANIFEST).write_text(json.dumps(obj))


def read_all(store: Path, verify: bool) -> dict[str, Any]:
    """Open ``store`` and read every row (all at once, and one row)."""
    import stoker

    ds = stoker.open(store, verify=verify)
    rows = ds[0 : len(ds)]
    rows["_len"] = len(ds)
    rows["_first"] = ds[0] if len(ds) else None
    return rows


def same(a: Any, b: Any) -> bool:
    """Whether two read results are equal, value for value (dtypes and shapes included)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if hasattr(a, "values") and hasattr(a, "offsets"):  # Ragged
        return type(a) is type(b) and same(a.values, b.values) and same(a.offsets, b.offsets)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _outcome(store: Path, verify: bool, expected: dict[str, Any]) -> tuple[str, str]:
    from stoker.errors import StokerError

    try:
        got = read_all(store, verify)
    except StokerError:
        return "stoker_error", ""
    except Exception as exc:  # noqa: BLE001 - the fuzzer's job is to count exactly these
        return "other_error", f"{type(exc).__name__}: {str(exc)[:160]}"
    return ("equal", "") if same(expected, got) else ("wrong", "")


def child(base: str, plan_file: str, start: int) -> None:
    """Run mutations ``start..`` of the plan on a copy of ``base``; one JSON line per mutation on stdout."""
    import resource

    limit = 4 * 2**30  # a damaged length must fail to allocate, not take the machine
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    mutations = [Mutation(**m) for m in json.loads(Path(plan_file).read_text())]
    work = Path(tempfile.mkdtemp(prefix="stoker-fuzz-")) / "store"
    shutil.copytree(base, work)
    try:
        originals = {name: (work / name).read_bytes() for name in (SHARD, MANIFEST)}
        expected = read_all(work, True)
        abort_at = int(os.environ.get("STOKER_FUZZ_ABORT_AT", "-1"))  # the harness's own test: die here
        for i in range(start, len(mutations)):
            m = mutations[i]
            print(json.dumps({"start": i}), flush=True)
            if i == abort_at:
                os.abort()
            apply(work, originals, m)
            results = [_outcome(work, verify, expected) for verify in (False, True)]
            print(json.dumps({"done": i, "results": results}), flush=True)
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def run(count: int, seed: int = 0, workdir: Path | None = None) -> Report:
    """Make ``count`` mutations (see :func:`plan`) of a fresh small store and count the outcomes."""
    own = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="stoker-fuzz-")) if workdir is None else workdir
    try:
        base = make_store(workdir / "base")
        mutations = plan(base, count, seed)
        plan_file = workdir / "plan.json"
        plan_file.write_text(json.dumps([asdict(m) for m in mutations]))
        report = Report(mutations=len(mutations))
        start = 0
        while start < len(mutations):
            start = _run_child(base, plan_file, start, mutations, report, workdir)
        return report
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def _run_child(
    base: Path, plan_file: Path, start: int, mutations: list[Mutation], report: Report, workdir: Path
) -> int:
    """One child from mutation ``start``; returns where the next child starts."""
    err = workdir / "child-stderr.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    code = f"import storefuzz; storefuzz.child({str(base)!r}, {str(plan_file)!r}, {start})"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=stderr, env=env)
    assert proc.stdout is not None
    current = start
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    hung = False
    while True:
        if not sel.select(timeout=HANG_S):
            hung = True
            proc.kill()
            break
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            msg = json.loads(line)
            if "start" in msg:
                current = msg["start"]
                continue
            m = mutations[msg["done"]]
            for verify, (outcome, detail) in zip((False, True), msg["results"]):
                key = f"verify={verify},resigned={m.resigned}"
                report.add(key, outcome, detail and f"{outcome} {asdict(m)} verify={verify}: {detail}")
            current = msg["done"] + 1
    rc = proc.wait()
    sel.close()
    proc.stdout.close()
    if current >= len(mutations) and rc == 0:
        return current
    m = mutations[current]
    tail = err.read_text(errors="replace")[-300:].strip().replace("\n", " | ")
    report.add(f"verify=?,resigned={m.resigned}", "hang" if hung else "abort", f"rc={rc} {asdict(m)}: {tail}")
    return current + 1
