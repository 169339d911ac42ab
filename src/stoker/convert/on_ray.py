"""``stoker.convert.on_ray``: a conversion run as Ray tasks over partitions of its input.

    import ray, stoker
    ray.init(address="auto")                       # the cluster (without it: a local Ray)
    stoker.convert.on_ray.text("/shared/corpus.tsv", "/shared/stores/corpus", max_length=128)
    stoker.convert.on_ray.images("/shared/photos", "/shared/stores/photos", mode="resized", size=256)

The same keywords as ``stoker.convert.text`` / ``images``, plus ``partitions`` (how many parts the
input is cut into), ``cpus_per_task`` (Ray CPUs and converter threads per task) and ``retries``
(attempts after a task's worker dies). The life of one conversion:

1. **Plan** (driver). A text file is cut into byte ranges ending at newlines; an image folder's file
   list into ranges of files (``partitions.py``). The plan is kept in ``.NAME.ray-parts`` beside the store.
2. **Pre-pass** (text; one Ray task per partition): each partition's newlines, examples and
   label names. Label names are agreed before any part is written (sorted over the whole input, as
   the single-machine conversion numbers them, or the ``label_names=`` given) and every task gets
   them, so codes mean the same in every part; line numbers get each partition's offset. Images
   need none: the driver lists the files and their classes once.
3. **Convert** (one Ray task per partition, run by ``ray_map.py``): the single-machine converter
   writes partition K's rows as the complete store ``part-K``, then a ``part-K.json`` marker. A task
   whose marker is there and whose part-store matches its checksums returns at once.
4. **Commit** (driver): ``stoker.merge`` links the part-stores' shards into one store, in partition
   order, writes one manifest and moves it into place atomically; the staging directory is removed.

The result equals, row for row, the single-machine conversion of the same input (shards may be
cut elsewhere). A task that fails ends the conversion with its StokerError (noted with the
partition), or, when its worker died ``retries + 1`` times, with a WorkerError naming the
partition; finished partitions are kept for the re-run. Why Ray, and its runs: docs/guides/cluster.md.

Every node must see the staging directory at the same path (a shared file system: NFS, Lustre,
EFS), and the input there too unless it is in an object store (``s3://bucket/prefix/``: each task
reads its own range of the objects, ``inputs.py``). The store may be an object-store URL (``s3://bucket/prefix``, with
``storage_options=`` as for ``stoker.write``) given a shared ``staging=`` directory: each task then
uploads its own part's shards (content-named, so a re-run uploads nothing twice) and the commit
step uploads the one manifest last (``stoker.merge`` to a URL).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stoker.convert.inputs import TextFiles, image_objects, image_skeleton, is_url, source_options
from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.convert.partitions import (
    clear,
    even_ranges,
    load_plan,
    part_json,
    part_name,
    plan_text,
    save_plan,
    staging_dir,
)
from stoker.convert.ray_map import collected, ray_module, run_map, slots
from stoker.convert.ray_tasks import convert_task, scan_task
from stoker.errors import ConfigError, EmptyDatasetError, InputError, StoreExistsError
from stoker.remote.merge import url_holds_store
from stoker.store.urls import is_remote
from stoker.store.writer import DEFAULT_SHARD_SIZE
from stoker.stores import merge

__all__ = ["images", "text"]

PathLike = str | os.PathLike[str]
TEXT_PARTITION_BYTES = 64 * 2**20  # default partition of a text file (more when the cluster has more CPUs)
IMAGE_PARTITION_FILES = 4096  # default partition of an image list (more when the cluster has more CPUs)


def text(
    src: PathLike,
    store: PathLike,
    tokenizer: Any = "bert-base-uncased",
    *,
    max_length: int | None = 512,
    text_column: str = "text",
    pair_column: str | None = None,
    label_column: str | None = "auto",
    keep_empty: bool = True,
    encoding_errors: str = "strict",
    label_names: Sequence[str] | None = None,
    class_to_idx: Mapping[str, int] | None = None,
    partitions: int | None = None,
    cpus_per_task: int = 1,
    retries: int = 2,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    metadata: Mapping[str, Any] | None = None,
    staging: PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Tokenize the text file ``src`` (.txt, .jsonl, .csv, .tsv) into ``store`` on Ray; see the module docstring.

    The keywords of ``stoker.convert.text`` mean the same here. ``partitions``: byte ranges the file
    is cut into (None: one per 64 MiB, rounded up to whole waves of the task slots); ``cpus_per_task``:
    Ray CPUs of each task, and its tokenizing threads; ``retries``: attempts after a dead worker;
    ``staging``: the directory of the parts (default ``.NAME.ray-parts`` beside a local store; needed
    for a URL store); ``storage_options``: for a URL store. ``report``: the ``"stoker.text"``
    metadata, plus ``partitions``, ``reused_partitions``, ``phase_seconds`` (plan, pre-pass, convert,
    merge: wall time of each), ``partition_seconds`` (each partition's conversion in its task),
    ``partition_windows`` (each task's start and end since the map began), ``partition_cpu_seconds``.
    """
    from stoker.text.inputs import TextColumns, describe_source
    from stoker.text.tokenizer import resolve

    t0 = time.perf_counter()
    ray = ray_module()
    files = TextFiles.of(src, storage_options)  # a local file, or text objects read by ranges in the tasks
    target = _Target.of(store, staging, source_options(src, store, storage_options), overwrite)
    _check_run(partitions, cpus_per_task, retries)
    columns = TextColumns.of(
        text_column, pair_column, label_column, keep_empty, encoding_errors, label_names, class_to_idx
    )
    options = ConvertOptions(overwrite, shard_size, False, cpus_per_task, metadata)
    tok = resolve(tokenizer, max_length=max_length)
    local = None if files.objects else Path(files.src)
    key = {
        "kind": "text",
        "src": files.src if local is None else str(local.resolve()),
        "size": sum(files.sizes),
        "mtime_ns": None if local is None else local.stat().st_mtime_ns,
        "objects": None
        if local is not None
        else _digest("\n".join(f"{n}\t{z}" for n, z in zip(files.names, files.sizes))),
        "tokenizer": tok.describe(),
        "columns": dataclasses.asdict(columns),
        "shard_size": options.shard_size,
        "metadata": options.metadata,
        "partitions": partitions,
        "store": str(target.dest),
    }
    stage, dest = target.staging, target.dest
    job: dict[str, Any] = {"kind": "text", "src": files.src, "files": files, "columns": columns, **target.job()}
    plan = load_plan(stage, key, overwrite)
    phases = {"plan": time.perf_counter() - t0}
    if plan is None:
        count = partitions or waves(math.ceil(sum(files.sizes) / TEXT_PARTITION_BYTES), slots(ray, cpus_per_task))
        parts = plan_text(files, count)
        stage.mkdir(parents=True, exist_ok=True)
        job["parts"] = [part_json(p) for p in parts]
        scans = run_map(ray, scan_task, [p.index for p in parts], job, cpus_per_task, retries, stage, src, dest)
        plan = {"key": key, "parts": job["parts"], "scans": [scans[p.index] for p in parts]}
        save_plan(stage, plan)
    phases["pre-pass"] = time.perf_counter() - t0 - sum(phases.values())
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
    began = time.time()
    results = run_map(ray, convert_task, wanted, job, cpus_per_task, retries, stage, src, dest)
    phases["convert"] = time.perf_counter() - t0 - sum(phases.values())
    summaries, windows = collected(stage, wanted, began)
    report = {
        **summaries[0]["report"],
        "source": describe_source(src),
        "skipped_empty": skipped,
        "replaced_lines": sum(s["replaced"] for s in scans),
        "cut_lines": sum(s["report"]["cut_lines"] for s in summaries),
    }
    target.merge([stage / part_name(i) for i in wanted], overwrite, {"stoker.text": report})
    clear(stage)
    phases["merge"] = time.perf_counter() - t0 - sum(phases.values())
    out = {**report, **_run_report(len(scans), results, phases, wanted, summaries, windows)}
    return ConvertResult(
        Path(dest), sum(s["rows"] for s in summaries), skipped, report=out, seconds=time.perf_counter() - t0
    )


def images(
    src: Any,
    store: PathLike,
    mode: str = "encoded",
    *,
    size: int | tuple[int, int] = 256,
    max_side: int | None = None,
    quality: int = 90,
    labels: Any = None,
    label_names: Sequence[str] | None = None,
    class_to_idx: Mapping[str, int] | None = None,
    on_error: str = "raise",
    max_pixels: int | None = None,
    partitions: int | None = None,
    cpus_per_task: int = 1,
    retries: int = 2,
    overwrite: bool = False,
    shard_size: int | str = DEFAULT_SHARD_SIZE,
    metadata: Mapping[str, Any] | None = None,
    staging: PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Image files (a folder, a list of paths, an ImageFolder object) into ``store`` on Ray; see the module docstring.

    The keywords of ``stoker.convert.images`` mean the same here. ``partitions``: ranges of files
    (None: one per 4096 files, rounded up to whole waves of the task slots); ``cpus_per_task``: Ray
    CPUs of each task, and its decoding threads; ``retries``: attempts after a dead worker;
    ``staging``, ``storage_options``: as for :func:`text`. ``report``: ``skipped``, ``ignored`` and
    ``classes`` as ``stoker.convert.images`` gives them, plus ``partitions``, ``reused_partitions``,
    ``phase_seconds`` (plan, convert, merge) and ``partition_seconds``, as for :func:`text`.
    """
    from stoker.convert.from_images import ImageStoreOptions
    from stoker.labels import label_map
    from stoker.vision.finder import find_images
    from stoker.vision.readers import Skipped

    t0 = time.perf_counter()
    ray = ray_module()
    target = _Target.of(store, staging, source_options(src, store, storage_options), overwrite)
    _check_run(partitions, cpus_per_task, retries)
    stage, dest = target.staging, target.dest
    objects, folder = None, src
    if is_url(src):  # the driver needs only the layout (labels files fetched): each task downloads its images
        objects = image_objects(src, storage_options)
        folder = image_skeleton(objects, stage / ".part-layout")
        metadata = {"root": os.fspath(src), **(metadata or {})}
    found = find_images(folder, labels, names=label_map(label_names, class_to_idx))
    if len(found) == 0:
        raise EmptyDatasetError(f"no image files found in {src!r}")
    opts = ImageStoreOptions(mode, size, max_side, quality, on_error, max_pixels)
    options = ConvertOptions(overwrite, shard_size, False, cpus_per_task, metadata)
    files = found.paths if objects is None else [found.name(i) for i in range(len(found))]
    listing = "\n".join(f"{p}\t{'' if found.labels is None else found.labels[i]}" for i, p in enumerate(files))
    key = {
        "kind": "images",
        "files": len(found),
        "listing": _digest(listing),
        "classes": found.classes,
        "root": found.root if objects is None else os.fspath(src),
        "store_options": dataclasses.asdict(opts),
        "shard_size": options.shard_size,
        "metadata": options.metadata,
        "partitions": partitions,
        "store": str(dest),
    }
    plan = load_plan(stage, key, overwrite)
    if plan is None:
        count = partitions or waves(math.ceil(len(found) / IMAGE_PARTITION_FILES), slots(ray, cpus_per_task))
        plan = {"key": key, "ranges": even_ranges(len(found), count)}
        save_plan(stage, plan)
    ranges = [tuple(r) for r in plan["ranges"]]
    job = {"kind": "images", "images": found, "objects": objects, "ranges": ranges, "opts": opts, **target.job()}
    job["options"] = dataclasses.replace(options, overwrite=True)
    indices = list(range(len(ranges)))
    phases = {"plan": time.perf_counter() - t0}
    began = time.time()
    results = run_map(ray, convert_task, indices, job, cpus_per_task, retries, stage, src, dest)
    phases["convert"] = time.perf_counter() - t0 - phases["plan"]
    summaries, windows = collected(stage, indices, began)
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
    target.merge([stage / part_name(i) for i in written], overwrite, meta)
    clear(stage)
    phases["merge"] = time.perf_counter() - t0 - sum(phases.values())
    report = {
        "skipped": tuple(skipped),
        "ignored": tuple(found.ignored),
        "classes": tuple(found.classes or ()),
        **_run_report(len(ranges), results, phases, indices, summaries, windows),
    }
    return ConvertResult(
        Path(dest), sum(s["rows"] for s in summaries), len(skipped), report=report, seconds=time.perf_counter() - t0
    )


# -- the driver's side ----------------------------------------------------------------------------


def _local(path: Any, option: str) -> Path:
    if isinstance(path, (str, os.PathLike)) and is_remote(path):
        raise ConfigError(
            f"{path} is a URL; a Ray conversion reads and writes a file system every node mounts at the same path "
            "(convert there, then upload the store)",
            option=option,
        )
    return Path(path)


def waves(least: int, slots: int) -> int:
    """The default partition count: at least ``least``, in whole waves of ``slots`` tasks (a last wave partly
    empty takes as long as a full one)."""
    return slots * max(1, math.ceil(least / slots))


def _run_report(
    count: int,
    results: Mapping[int, Any],
    phases: dict[str, float],
    indices: list[int],
    summaries: list[dict[str, Any]],
    windows: dict[int, list[float]],
) -> dict[str, Any]:
    """The report's entries on the run itself: partitions (and those reused), phases and each task's times."""
    return {
        "partitions": count,
        "reused_partitions": sorted(i for i, r in results.items() if r),
        "phase_seconds": phases,
        "partition_seconds": {i: s.get("seconds") for i, s in zip(indices, summaries, strict=True)},
        "partition_windows": windows,
        "partition_cpu_seconds": [s.get("cpu_seconds") for s in summaries],
    }


def _digest(text: str) -> str:
    import xxhash

    return str(xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogateescape")))


def _check_run(partitions: int | None, cpus: int, retries: int) -> None:
    for name, value, least in (("partitions", partitions, 1), ("cpus_per_task", cpus, 1), ("retries", retries, 0)):
        if value is None and name == "partitions":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{name} must be an integer >= {least}, not {value!r}", option=name)


@dataclasses.dataclass(frozen=True)
class _Target:
    """Where a Ray conversion writes: the store (a path or a URL) and the staging directory of its parts."""

    dest: str | Path
    staging: Path
    storage_options: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, store: Any, staging: Any, storage_options: Any, overwrite: bool) -> _Target:
        """Checked: a URL store needs ``staging`` (a shared directory); an existing store needs ``overwrite``."""
        if is_remote(store):
            url = os.fspath(store)
            if staging is None:
                raise ConfigError(
                    f"{url} is a URL: pass staging= a directory every node mounts (the parts are written there "
                    "and each task uploads its own part's shards)",
                    option="staging",
                )
            if url_holds_store(url, storage_options) and not overwrite:
                raise StoreExistsError(f"{url} holds a store; pass overwrite=True to replace it")
            return cls(url, _local(staging, "staging"), storage_options)
        if storage_options is not None:
            raise ConfigError(
                f"storage_options is for a URL store, and {store} is a local path", option="storage_options"
            )
        dest = Path(store)
        if dest.exists() and not overwrite:
            raise StoreExistsError(f"{dest} exists; pass overwrite=True to replace it", path=dest)
        return cls(dest, staging_dir(dest) if staging is None else _local(staging, "staging"))

    def job(self) -> dict[str, Any]:
        """What a task needs to know of the target."""
        url = self.dest if isinstance(self.dest, str) else None
        return {"staging": str(self.staging), "url": url, "storage_options": self.storage_options}

    def merge(self, parts: list[Path], overwrite: bool, metadata: Mapping[str, Any]) -> None:
        """The commit step: the parts merged into the store (their shards uploaded already, for a URL)."""
        merge(
            parts, self.dest, overwrite=overwrite, metadata=metadata, verify=False, storage_options=self.storage_options
        )


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
