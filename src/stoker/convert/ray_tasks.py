"""The tasks of a Ray conversion (``on_ray.py``), run on Ray workers as Ray tasks.

Each takes one row ``{"index": K}`` and the conversion's ``job`` (a dict: the input,
the staging directory, the options) and returns ``{"index", "result": JSON, "error": bytes}``:

- :func:`scan_task`: the pre-pass over text partition K (``partitions.scan_text_part``);
- :func:`convert_task`: partition K converted by the single-machine converter into the part-store
  ``part-K`` (and, for a URL store, its shards uploaded), then its marker written; a partition
  whose marker and checksums hold returns at once. A StokerError is sent back pickled (as Ray
  pickles everything it sends), with the partition noted, instead of raised: Ray would wrap
  it and lose its type and message.
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

from stoker.convert.partitions import (
    TextPart,
    done_summary,
    mark_done,
    materialize,
    note_attempt,
    part_name,
    scan_text_part,
)
from stoker.errors import EmptyDatasetError, StokerError
from stoker.remote.merge import upload_part


def note(exc: BaseException, text: str) -> None:
    """``exc.add_note(text)`` (Python 3.11+); on 3.10 the note is kept in ``__notes__`` all the same."""
    if hasattr(exc, "add_note"):
        exc.add_note(text)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", []), text]  # type: ignore[attr-defined]


def scan_task(row: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The Ray task of the pre-pass: one text partition's newlines, examples and labels."""
    index = int(row["index"])
    part = TextPart(**job["parts"][index])
    with tempfile.TemporaryDirectory(prefix="stoker-ray-") as tmp:
        scan = scan_text_part(job["files"], part, job["columns"], Path(tmp))
    return {"index": index, "result": json.dumps(scan), "error": b""}


def convert_task(row: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    """The Ray task of a conversion: partition ``row["index"]`` into its part-store, unless it is finished already."""
    started, cpu = time.time(), time.process_time()  # wall clock: the driver places the task in its map
    index = int(row["index"])
    staging = Path(job["staging"])
    if done_summary(staging, index) is not None:
        return {"index": index, "result": json.dumps(True), "error": b""}
    note_attempt(staging, index)
    target = staging / part_name(index)
    try:
        t0 = time.perf_counter()
        summary = _text_part(job, index, target) if job["kind"] == "text" else _image_part(job, index, target)
        summary["seconds"] = time.perf_counter() - t0  # the partition's own conversion, for the report
        if job["url"] is not None and summary["rows"]:  # this part's shards go up from here, beside the others'
            upload_part(target, job["url"], job["storage_options"], verify=False)
    except StokerError as exc:  # sent back as it is (Ray would wrap it in a RayTaskError)
        note(exc, f"in partition {index} of the Ray conversion ({_where(job, index)})")
        return {"index": index, "result": json.dumps(None), "error": pickle.dumps(exc)}
    summary["window"] = [started, time.time()]
    summary["cpu_seconds"] = time.process_time() - cpu  # of the worker's process (it runs one task at a time)
    mark_done(staging, index, summary)
    return {"index": index, "result": json.dumps(False), "error": b""}


def _where(job: dict[str, Any], index: int) -> str:
    if job["kind"] == "text":
        part, offset = job["parts"][index], job["offsets"][index]
        where = job["files"].where(part.get("file", 0))
        return f"bytes {part['start']}..{part['stop']} of {where}; its line numbers + {offset} are the input's"
    a, b = job["ranges"][index]
    return f"files {a}..{b - 1} of the image list"


def _text_part(job: dict[str, Any], index: int, target: Path) -> dict[str, Any]:
    from stoker.convert import from_text

    # the task declared cpus_per_task CPUs and tokenizes on that many threads: the Rust tokenizer's own pool (one
    # thread per core of the node) would add as many again per task, every task of the node spinning on every core
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    part = TextPart(**job["parts"][index])
    with tempfile.TemporaryDirectory(prefix="stoker-ray-") as tmp:
        path, _, _, _ = materialize(job["files"], part, Path(tmp))
        result = from_text.convert(
            path,
            target,
            job["tokenizer"],
            job["max_length"],
            job["columns"],
            job["options"],
            line_offset=job["offsets"][index],
            source_name=job["src"],
        )
    return {"rows": result.rows, "report": dict(result.report)}


def _image_part(job: dict[str, Any], index: int, target: Path) -> dict[str, Any]:
    import numpy as np

    from stoker.convert import from_images
    from stoker.vision.finder import ImageList

    found, objects = job["images"], job.get("objects")
    a, b = job["ranges"][index]
    with tempfile.TemporaryDirectory(prefix="stoker-ray-images-") as tmp:
        paths, root = found.paths[a:b], found.root
        if objects is not None:  # this partition's objects, downloaded here (the driver listed only their layout)
            where, number = objects.remote(), {n: i for i, n in enumerate(objects.names)}
            names = [found.name(r) for r in range(a, b)]
            paths, root = [str(objects.download(where, number[n], Path(tmp))) for n in names], tmp
        part = ImageList(paths, None if found.labels is None else found.labels[a:b], found.classes, root, ())
        try:
            result = from_images.convert(part, target, None, job["opts"], job["options"])
            rows, bad = result.rows, list(result.report["skipped"])
        except EmptyDatasetError:  # every file of this partition was skipped: record which, and why
            rows = 0
            bad = from_images._Converter(part, job["opts"])(np.arange(len(part)))[1]
    return {"rows": rows, "skipped": [{"row": a + s.row, "file": s.file, "reason": s.reason} for s in bad]}


__all__ = ["convert_task", "note", "scan_task"]
