"""``stoker.convert.on_ray``: a conversion run as tasks of Ray Data over partitions of its input.

    import ray, stoker
    ray.init(address="auto")                       # the cluster (without it: a local Ray)
    stoker.convert.on_ray.text("/shared/corpus.tsv", "/shared/stores/corpus", max_length=128)
    stoker.convert.on_ray.images("/shared/photos", "/shared/stores/photos", mode="resized", size=256)

The same keywords as ``stoker.convert.text`` / ``images``, plus ``partitions`` (how many parts the
input is cut into), ``cpus_per_task`` (Ray CPUs and converter threads per task) and ``retries``
(attempts after a task's worker dies). The life of one conversion:

1. **Plan** (driver). A text file is cut into byte ranges ending at newlines; an image folder's file
   list into ranges of files (``partitions.py``). The plan is kept in the staging directory
   ``.NAME.ray-parts`` beside the store, with what identifies the input and the options.
2. **Pre-pass** (text; one Ray Data task per partition): each partition's newlines, examples and
   label names. Label names are agreed before any part is written (sorted over the whole input, as
   the single-machine conversion numbers them, or the ``label_names=`` given) and every task gets
   them, so codes mean the same in every part; line numbers get each partition's offset. Images
   need none: the driver lists the files and their classes once.
3. **Convert** (one Ray Data task per partition): the single-machine converter
   (``from_text.convert`` / ``from_images.convert``) writes partition K's rows as the complete
   store ``part-K`` (whole shards), then a ``part-K.json`` marker. A task whose marker is there and
   whose part-store matches its checksums returns at once: a re-run converts only what is missing.
4. **Commit** (driver): ``stoker.merge`` links the part-stores' shards into one store, in partition
   order, writes one manifest and moves it into place atomically; the staging directory is removed.

The result equals, row for row, the single-machine conversion of the same input (shards may be
cut elsewhere). A task that fails ends the conversion with its StokerError (noted with the
partition), or, when its worker died ``retries + 1`` times, with a WorkerError naming the
partition; finished partitions are kept for the re-run.

Why Ray Data and not Dask: Ray is already stoker's cluster extra (``stoker[ray]``), its tasks are
retried when a worker or node dies, scheduled by the resources they declare (``num_cpus``), and
the same ``ray.init(address=...)`` reaches a laptop, a cluster or an autoscaling one; a Ray Data
map over a dataset of partitions is the whole scheduler this needs, with no cluster of our own.

Every node must see the input and the store's parent directory at the same paths (a shared file
system: NFS, Lustre, EFS, a FUSE-mounted bucket). Object-store URLs are refused here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.convert.partitions import (
    TextPart,
    attempts,
    clear,
    done_parts,
    done_summary,
    even_ranges,
    load_plan,
    mark_done,
    materialize,
    note_attempt,
    part_json,
    part_name,
    plan_text,
    save_plan,
    scan_text_part,
    staging_dir,
)
from stoker.errors import ConfigError, EmptyDatasetError, InputError, StokerError, StoreExistsError, WorkerError
from stoker.store.location import is_remote
from stoker.store.merge import merge
from stoker.store.writer import DEFAULT_SHARD_SIZE

__all__ = ["images", "text"]

PathLike = str | os.PathLike[str]
TEXT_PARTITION_BYTES = 64 * 2**20  # default partition of a text file (more when the cluster has more CPUs)
IMAGE_PARTITION_FILES = 4096  # default partition of an image list (more when the cluster has more CPUs)
EXIT_ENV = "STOKER_TEST_RAY_EXIT"  # test hook: partitions (comma-separated) whose task's worker exits at once


def text(
    src: PathLike,
    store: PathLike,
    tokenizer: Any = "bert-base-uncased",
    *,
    max_length: int | None = 512,
    text_column: str = "text",
    pair_column: str | None = None,
    label_column: str | None = "auto",
    keep_empty: bool = False,
    encoding_errors: str = "strict",
    label_names: Sequence[str] | None = None,
    class_to_idx: Mapping[str, int] | None = None,
    partitions: int | None = None,
    cpus_per_task: int = 1,
    retries: int = 2,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    metadata: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Tokenize the text file ``src`` (.txt, .jsonl, .csv, .tsv) into ``store`` on Ray; see the module docstring.

    The keywords of ``stoker.convert.text`` mean the same here. ``partitions``: byte ranges the file
    is cut into (None: one per 64 MiB, at least one per task slot of the cluster); ``cpus_per_task``:
    Ray CPUs of each task, and its tokenizing threads; ``retries``: attempts after a dead worker.
    ``report``: the ``"stoker.text"`` metadata, plus ``partitions`` and ``reused_partitions``.
    """
    from stoker.text.inputs import TextColumns, describe_source
    from stoker.text.tokenizer import resolve

    t0 = time.perf_counter()
    ray = _ray()
    path, dest = _local(src, "src"), _local(store, "store")
    _check_run(dest, overwrite, partitions, cpus_per_task, retries)
    columns = TextColumns.of(
        text_column, pair_column, label_column, keep_empty, encoding_errors, label_names, class_to_idx
    )
    options = ConvertOptions(overwrite, shard_size, False, cpus_per_task, metadata)
    tok = resolve(tokenizer, max_length=max_length)
    stat = path.stat() if path.is_file() else None
    key = {
        "kind": "text",
        "src": str(path.resolve()),
        "size": None if stat is None else stat.st_size,
        "mtime_ns": None if stat is None else stat.st_mtime_ns,
        "tokenizer": tok.describe(),
        "columns": dataclasses.asdict(columns),
        "shard_size": options.shard_size,
        "metadata": options.metadata,
        "partitions": partitions,
    }
    staging = staging_dir(dest)
    job: dict[str, Any] = {"kind": "text", "src": str(path), "staging": str(staging), "columns": columns}
    plan = load_plan(staging, key, overwrite)
    if plan is None:
        count = partitions or max(
            math.ceil((stat.st_size if stat else 0) / TEXT_PARTITION_BYTES), _slots(ray, cpus_per_task)
        )
        parts = plan_text(path, count)
        staging.mkdir(parents=True, exist_ok=True)
        job["parts"] = [part_json(p) for p in parts]
        scans = _run(ray, _scan_task, [p.index for p in parts], job, cpus_per_task, retries, staging, path, dest)
        plan = {"key": key, "parts": job["parts"], "scans": [scans[p.index] for p in parts]}
        save_plan(staging, plan)
    scans = plan["scans"]
    names = _agreed_labels(scans, columns, describe_source(src))
    before = 0
    offsets = []
    for part, scan in zip(plan["parts"], scans, strict=True):
        offsets.append(before - (1 if part["header"] else 0))
        before += scan["newlines"]
    job.update(
        parts=plan["parts"],
        offsets=offsets,
        columns=dataclasses.replace(columns, label_names=names),
        tokenizer=tokenizer,
        max_length=max_length,
        options=dataclasses.replace(options, overwrite=True),
    )
    skipped = sum(s["skipped"] for s in scans)
    wanted = [s["index"] for s in scans if s["examples"]]
    if not wanted:
        raise EmptyDatasetError(
            f"{describe_source(src)} holds no text ({skipped} empty lines skipped; keep_empty=True keeps them)"
        )
    results = _run(ray, _convert_task, wanted, job, cpus_per_task, retries, staging, path, dest)
    summaries = [_summary(staging, i) for i in wanted]
    report = {
        **summaries[0]["report"],
        "source": describe_source(src),
        "skipped_empty": skipped,
        "replaced_lines": sum(s["replaced"] for s in scans),
        "cut_lines": sum(s["report"]["cut_lines"] for s in summaries),
    }
    merge(
        [staging / part_name(i) for i in wanted],
        dest,
        overwrite=overwrite,
        metadata={"stoker.text": report},
        verify=False,
    )
    clear(staging)
    rows = sum(s["rows"] for s in summaries)
    out = {**report, "partitions": len(scans), "reused_partitions": sorted(i for i, r in results.items() if r)}
    return ConvertResult(dest, rows, skipped, report=out, seconds=time.perf_counter() - t0)


def images(
    src: Any,
    store: PathLike,
    mode: str = "encoded",
    *,
    size: int | tuple[int, int] = 256,
    max_side: int | None = None,
    quality: int = 90,
    labels: Any = None,
    on_error: str = "raise",
    max_pixels: int | None = None,
    partitions: int | None = None,
    cpus_per_task: int = 1,
    retries: int = 2,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    metadata: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Image files (a folder, a list of paths, an ImageFolder object) into ``store`` on Ray; see the module docstring.

    The keywords of ``stoker.convert.images`` mean the same here. ``partitions``: ranges of files
    (None: one per 4096 files, at least one per task slot of the cluster); ``cpus_per_task``: Ray
    CPUs of each task, and its decoding threads; ``retries``: attempts after a dead worker.
    ``report``: ``skipped``, ``ignored`` and ``classes`` as ``stoker.convert.images`` gives them,
    plus ``partitions`` and ``reused_partitions``.
    """
    import xxhash

    from stoker.convert.from_images import ImageStoreOptions
    from stoker.vision.finder import find_images
    from stoker.vision.readers import Skipped

    t0 = time.perf_counter()
    ray = _ray()
    dest = _local(store, "store")
    _check_run(dest, overwrite, partitions, cpus_per_task, retries)
    found = find_images(src, labels)
    if len(found) == 0:
        raise EmptyDatasetError(f"no image files found in {src!r}")
    opts = ImageStoreOptions(mode, size, max_side, quality, on_error, max_pixels)
    options = ConvertOptions(overwrite, shard_size, False, cpus_per_task, metadata)
    listing = "\n".join(f"{p}\t{'' if found.labels is None else found.labels[i]}" for i, p in enumerate(found.paths))
    key = {
        "kind": "images",
        "files": len(found),
        "listing": xxhash.xxh3_128_hexdigest(listing.encode("utf-8", "surrogateescape")),
        "classes": found.classes,
        "root": found.root,
        "store_options": dataclasses.asdict(opts),
        "shard_size": options.shard_size,
        "metadata": options.metadata,
        "partitions": partitions,
    }
    staging = staging_dir(dest)
    plan = load_plan(staging, key, overwrite)
    if plan is None:
        count = partitions or max(math.ceil(len(found) / IMAGE_PARTITION_FILES), _slots(ray, cpus_per_task))
        plan = {"key": key, "ranges": even_ranges(len(found), count)}
        save_plan(staging, plan)
    ranges = [tuple(r) for r in plan["ranges"]]
    job = {"kind": "images", "staging": str(staging), "images": found, "ranges": ranges, "opts": opts}
    job["options"] = dataclasses.replace(options, overwrite=True)
    indices = list(range(len(ranges)))
    results = _run(ray, _convert_task, indices, job, cpus_per_task, retries, staging, src, dest)
    summaries = [_summary(staging, i) for i in indices]
    skipped = [Skipped(s["row"], s["file"], s["reason"]) for summary in summaries for s in summary["skipped"]]
    written = [i for i in indices if summaries[i]["rows"]]
    if not written:
        first = skipped[0]
        raise EmptyDatasetError(
            f"every one of the {len(found)} images was skipped; nothing to write (first: {first.file}: {first.reason})"
        )
    meta = {
        "skipped": [{"file": s.file, "reason": s.reason} for s in skipped[:1000]],
        "skipped_count": len(skipped),
        "ignored_count": len(found.ignored),
    }
    merge([staging / part_name(i) for i in written], dest, overwrite=overwrite, metadata=meta, verify=False)
    clear(staging)
    report = {
        "skipped": tuple(skipped),
        "ignored": tuple(found.ignored),
        "classes": tuple(found.classes or ()),
        "partitions": len(ranges),
        "reused_partitions": sorted(i for i, r in results.items() if r),
    }
    rows = sum(s["rows"] for s in summaries)
    return ConvertResult(dest, rows, len(skipped), report=report, seconds=time.perf_counter() - t0)


# -- the driver's side ----------------------------------------------------------------------------


def _ray() -> Any:
    try:
        import ray.data  # binds ray as well
    except ImportError as exc:
        raise ConfigError(
            f"stoker.convert.on_ray needs Ray Data: pip install 'stoker[ray]' ({exc})", option="on_ray"
        ) from exc
    return ray


def _local(path: Any, option: str) -> Path:
    if isinstance(path, (str, os.PathLike)) and is_remote(path):
        raise ConfigError(
            f"{path} is a URL; a Ray conversion reads and writes a file system every node mounts at the same path "
            "(convert there, then upload the store)",
            option=option,
        )
    return Path(path)


def _check_run(dest: Path, overwrite: bool, partitions: int | None, cpus: int, retries: int) -> None:
    for name, value, least in (("partitions", partitions, 1), ("cpus_per_task", cpus, 1), ("retries", retries, 0)):
        if value is None and name == "partitions":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{name} must be an integer >= {least}, not {value!r}", option=name)
    if dest.exists() and not overwrite:
        raise StoreExistsError(f"{dest} exists; pass overwrite=True to replace it", path=dest)


def _slots(ray: Any, cpus_per_task: int) -> int:
    """Tasks the cluster runs at once (starting a local Ray when none is connected)."""
    if not ray.is_initialized():
        ray.init()
    return max(1, int(ray.cluster_resources().get("CPU", 1)) // cpus_per_task)


def _agreed_labels(scans: list[dict[str, Any]], columns: Any, where: str) -> tuple[str, ...] | None:
    """The label names every partition codes by: the given map, or all names found, sorted."""
    if columns.label_names is not None:
        return tuple(columns.label_names)
    kinds = {s["label_kind"] for s in scans} - {None}
    if "name" in kinds and len(kinds) > 1:
        raise InputError(f"{where}: labels mix numbers and names ({sorted(kinds)}); use one kind of label")
    if "name" not in kinds:
        return None
    return tuple(sorted({n for s in scans for n in s["label_names"] or ()}))


def _run(
    ray: Any,
    fn: Any,
    indices: list[int],
    job: dict[str, Any],
    cpus: int,
    retries: int,
    staging: Path,
    src: Any,
    dest: Path,
) -> dict[int, Any]:
    """``fn(index, job)`` for every partition in ``indices``, as one Ray Data map; index -> what it returned."""
    exits = {int(x) for x in os.environ.get(EXIT_ENV, "").split(",") if x.strip()}
    items = [{"index": i, "exit": i in exits} for i in indices]
    context = ray.data.DataContext.get_current()
    bars = context.enable_progress_bars
    context.enable_progress_bars = False
    try:
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        with warnings.catch_warnings():  # max_retries has no named parameter yet (Ray Data's default: retry forever)
            warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
            mapped = ds.map(fn, fn_kwargs={"job": job}, num_cpus=cpus, max_retries=retries)
        rows = mapped.take_all()
    except Exception as exc:  # noqa: BLE001 - a worker that died, or Ray failing: a WorkerError naming the partition
        raise _failure(exc, indices, staging, retries, src, dest) from exc
    finally:
        context.enable_progress_bars = bars
    rows.sort(key=lambda r: int(r["index"]))
    failed = [r for r in rows if r["error"]]
    if failed:  # a partition's own StokerError (pickled by the task, as Ray pickles all it sends)
        error = pickle.loads(failed[0]["error"])
        _note(error, f"in the Ray conversion of {src} into {dest}: {_resume(indices, staging)}")
        raise error
    return {int(r["index"]): json.loads(r["result"]) for r in rows}


def _note(exc: BaseException, text: str) -> None:
    """``exc.add_note(text)`` (Python 3.11+); on 3.10 the note is kept in ``__notes__`` all the same."""
    if hasattr(exc, "add_note"):
        exc.add_note(text)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", []), text]  # type: ignore[attr-defined]


def _resume(indices: list[int], staging: Path) -> str:
    done = len(done_parts(staging, indices))
    return (
        f"{done} of {len(indices)} partitions finished and are kept in {staging}; "
        "run the same call again to convert only the rest"
    )


def _failure(exc: BaseException, indices: list[int], staging: Path, retries: int, src: Any, dest: Path) -> Exception:
    unfinished = [i for i in indices if i not in set(done_parts(staging, indices))]
    resume = _resume(indices, staging)
    dead = [i for i in unfinished if attempts(staging, i) > retries] or unfinished
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    return WorkerError(
        f"the Ray conversion of {src} into {dest} stopped: partition(s) {dead} failed "
        f"{retries + 1} time(s) ({type(exc).__name__}: {first}); {resume}",
        stage=f"ray partition {dead[0] if dead else '?'}",
    )


def _summary(staging: Path, index: int) -> dict[str, Any]:
    return dict(json.loads((staging / f"{part_name(index)}.json").read_text(encoding="utf-8")))


# -- the tasks (run on Ray workers) ----------------------------------------------------------------


def _scan_task(row: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """Ray Data map function of the pre-pass: one text partition's newlines, examples and labels."""
    index = int(row["index"])
    part = TextPart(**job["parts"][index])
    with tempfile.TemporaryDirectory(prefix="stoker-ray-") as tmp:
        scan = scan_text_part(Path(job["src"]), part, job["columns"], Path(tmp))
    return {"index": index, "result": json.dumps(scan), "error": b""}


def _convert_task(row: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """Ray Data map function: partition ``row["index"]`` into its part-store, unless it is finished already."""
    index = int(row["index"])
    staging = Path(job["staging"])
    if done_summary(staging, index) is not None:
        return {"index": index, "result": json.dumps(True), "error": b""}
    note_attempt(staging, index)
    if row["exit"]:
        os._exit(1)  # test hook (STOKER_TEST_RAY_EXIT): this worker dies as a killed one would
    target = staging / part_name(index)
    try:
        summary = _text_part(job, index, target) if job["kind"] == "text" else _image_part(job, index, target)
    except StokerError as exc:  # sent back as it is (Ray Data would wrap it, its type and message lost)
        _note(exc, f"in partition {index} of the Ray conversion ({_where(job, index)})")
        return {"index": index, "result": json.dumps(None), "error": pickle.dumps(exc)}
    mark_done(staging, index, summary)
    return {"index": index, "result": json.dumps(False), "error": b""}


def _where(job: dict[str, Any], index: int) -> str:
    if job["kind"] == "text":
        part, offset = job["parts"][index], job["offsets"][index]
        return f"bytes {part['start']}..{part['stop']} of {job['src']}; its line numbers + {offset} are the file's"
    a, b = job["ranges"][index]
    return f"files {a}..{b - 1} of the image list"


def _text_part(job: dict[str, Any], index: int, target: Path) -> dict[str, Any]:
    from stoker.convert import from_text

    part = TextPart(**job["parts"][index])
    with tempfile.TemporaryDirectory(prefix="stoker-ray-") as tmp:
        path, _, _ = materialize(Path(job["src"]), part, Path(tmp))
        result = from_text.convert(
            path,
            target,
            job["tokenizer"],
            job["max_length"],
            job["columns"],
            job["options"],
            line_offset=job["offsets"][index],
        )
    return {"rows": result.rows, "report": dict(result.report)}


def _image_part(job: dict[str, Any], index: int, target: Path) -> dict[str, Any]:
    import numpy as np

    from stoker.convert import from_images
    from stoker.vision.finder import ImageList

    found = job["images"]
    a, b = job["ranges"][index]
    part = ImageList(
        found.paths[a:b], None if found.labels is None else found.labels[a:b], found.classes, found.root, ()
    )
    try:
        result = from_images.convert(part, target, None, job["opts"], job["options"])
        rows, bad = result.rows, list(result.report["skipped"])
    except EmptyDatasetError:  # every file of this partition was skipped: record which, and why
        rows = 0
        bad = from_images._Converter(part, job["opts"])(np.arange(len(part)))[1]
    return {"rows": rows, "skipped": [{"row": a + s.row, "file": s.file, "reason": s.reason} for s in bad]}
