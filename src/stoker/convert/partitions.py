"""Partitions of a conversion's input and the staging directory of their part-stores (for ``on_ray.py``).

A text input (a local file, or text objects under a URL: ``inputs.TextFiles``) is cut into byte ranges
of its files that end at a newline, so each partition holds whole lines; a CSV/TSV partition after the
first is given its file's header line. Partitions read their bytes themselves (ranged GETs for objects). A partition is written to a
local file before it is read (:func:`materialize`), so the single-machine text converter reads it
unchanged; its lines are numbered as the whole file numbers them by an offset, the newlines before
it (counted by the pre-pass, :func:`scan_text_part`, which also collects its label names).

An image list is cut into ranges of files (:func:`even_ranges`).

The staging directory ``.NAME.ray-parts`` beside the store holds:

- ``plan.json``: what the partitions are and what identifies the input and the options
  (:func:`load_plan`, :func:`save_plan`); a re-run with another input or other options is refused;
- ``part-NNNNN/``: the store of partition NNNNN (a complete store once its manifest is written);
- ``part-NNNNN.json``: written after the part-store is complete, with what the partition's
  conversion reported (:func:`mark_done`, :func:`done_summary`);
- ``part-NNNNN.attempts``: one line per attempt at the partition, to name one that keeps failing.

Nothing here imports Ray.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stoker.convert.inputs import TextFiles
from stoker.errors import ConfigError, InputError, ShardError, StokerError
from stoker.store.format import Manifest
from stoker.store.shardfile import file_checksum
from stoker.text.inputs import TextColumns, iter_blocks
from stoker.text.labels import kind_of

PLAN_NAME = "plan.json"


def staging_dir(store: Path) -> Path:
    """The staging directory of a Ray conversion into ``store``: ``.NAME.ray-parts`` beside it."""
    return store.parent / f".{store.name}.ray-parts"


def part_name(index: int) -> str:
    return f"part-{index:05d}"


@dataclass(frozen=True)
class TextPart:
    """Bytes ``start:stop`` of text file ``file``, with ``header`` bytes of its first line put before them."""

    index: int
    start: int
    stop: int
    header: int = 0
    file: int = 0


def plan_text(files: TextFiles, partitions: int) -> list[TextPart]:
    """``files`` cut into about ``partitions`` byte ranges of about one size (each file into a share
    by its size, at least one), each ending after a newline; a CSV/TSV file's header put before each of its
    ranges but the first file's first (the header lines of the files after the first are left out)."""
    read = files.reader()
    headers = files.headers(read)
    total = max(sum(files.sizes), 1)
    parts: list[TextPart] = []
    for i, size in enumerate(files.sizes):
        count = max(1, round(partitions * size / total))
        cuts = [headers[i] if i else 0]
        for k in range(1, count):
            cut = _line_end(read, i, max(k * size // count - 1, headers[i], cuts[-1]), size)
            if cuts[-1] < cut < size:
                cuts.append(cut)
        cuts.append(size)
        for k, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False)):
            if b > a or (i == 0 and k == 0):
                parts.append(TextPart(len(parts), a, b, headers[i] if (i or k) else 0, i))
    return parts


def _line_end(read: Any, i: int, at: int, size: int) -> int:
    """The offset just after the first newline at or after ``at`` in file ``i`` (``size`` when there is none)."""
    while at < size:
        piece = read(i, at, min(at + 65536, size))
        if not piece:
            break
        end = piece.find(b"\n")
        if end >= 0:
            return at + end + 1
        at += len(piece)
    return size


def materialize(files: TextFiles, part: TextPart, directory: Path) -> tuple[Path, int, int, bool]:
    """Write partition ``part`` as a file in ``directory``; (its path, newlines and double quotes of its range,
    whether the range ends with a newline)."""
    read = files.reader()
    out = directory / f"{part_name(part.index)}{files.suffix}"
    newlines = quotes = 0
    last = b"\n"
    with open(out, "wb") as w:
        if part.header:
            w.write(read(part.file, 0, part.header))
        for chunk in files.chunks(read, part.file, part.start, part.stop):
            newlines += chunk.count(b"\n")
            quotes += chunk.count(b'"')
            w.write(chunk)
            last = chunk[-1:]
    return out, newlines, quotes, last == b"\n"


def scan_text_part(files: TextFiles, part: TextPart, columns: TextColumns, directory: Path) -> dict[str, Any]:
    """The pre-pass over one partition: its newlines, examples, and label kind and names (no tokenizing)."""
    path, newlines, quotes, ends = materialize(files, part, directory)
    try:
        if files.fmt == "csv" and quotes % 2:
            raise InputError(
                f"{files.where(part.file)}: partition {part.index} (bytes {part.start}..{part.stop}) ends inside a "
                "quoted field that spans lines; convert it with fewer partitions, or as JSON Lines"
            )
        examples = skipped = replaced = 0
        labels: list[Any] = []
        for block in iter_blocks(path, columns):
            examples += len(block.texts)
            skipped += block.skipped_empty
            replaced += block.replaced_lines
            if block.labels is not None and columns.label_names is None:
                labels.extend(block.labels)
        kind = kind_of(labels, files.src) if labels else None
        names = sorted({str(v) for v in labels}) if kind == "name" else None
    finally:
        path.unlink(missing_ok=True)
    return {
        "index": part.index,
        "newlines": newlines + (0 if ends else 1),  # the single-machine reading puts a newline after a file's end
        "examples": examples,
        "skipped": skipped,
        "replaced": replaced,
        "label_kind": kind,
        "label_names": names,
    }


def even_ranges(count: int, partitions: int) -> list[tuple[int, int]]:
    """``0:count`` cut into ``partitions`` ranges whose sizes differ by at most one (none empty)."""
    n = max(1, min(partitions, count))
    return [(k * count // n, (k + 1) * count // n) for k in range(n)]


def load_plan(staging: Path, key: Mapping[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """The plan recorded in ``staging`` for the input and options ``key``; None when there is none.

    Another input's plan is a ConfigError, or with ``overwrite`` the staging directory's parts are removed.
    """
    path = staging / PLAN_NAME
    if not path.is_file():
        return None
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}); delete {staging} to start over", option="overwrite") from exc
    if plan.get("key") == json.loads(json.dumps(dict(key))):
        return dict(plan)
    if not overwrite:
        raise ConfigError(
            f"{staging} holds the finished partitions of another conversion (other input, or other options: "
            f"{_first_difference(plan.get('key'), key)}); pass overwrite=True to start over, or delete it",
            option="overwrite",
        )
    clear(staging)
    return None


def _first_difference(old: Any, new: Mapping[str, Any]) -> str:
    if not isinstance(old, Mapping):
        return "no readable key"
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            return f"{k} was {old.get(k)!r:.80}, now {new.get(k)!r:.80}"
    return "none found"


def save_plan(staging: Path, plan: Mapping[str, Any]) -> None:
    staging.mkdir(parents=True, exist_ok=True)
    _write_json(staging / PLAN_NAME, plan)


def clear(staging: Path) -> None:
    """Remove the plan, the part-stores and the markers of a staging directory (and the directory, once empty)."""
    import shutil

    if not staging.is_dir():
        return
    (staging / PLAN_NAME).unlink(missing_ok=True)
    for entry in staging.iterdir():
        if entry.name.startswith(("part-", ".part-")):
            if entry.is_dir() and not entry.is_symlink():
                (entry / "manifest.json").unlink(missing_ok=True)
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    try:
        staging.rmdir()
    except OSError:
        pass


def _write_json(path: Path, obj: Any) -> None:
    part = path.with_name(path.name + ".part")
    with open(part, "w", encoding="utf-8") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)


def note_attempt(staging: Path, index: int) -> None:
    with open(staging / f"{part_name(index)}.attempts", "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")


def attempts(staging: Path, index: int) -> int:
    try:
        return len((staging / f"{part_name(index)}.attempts").read_text(encoding="utf-8").splitlines())
    except OSError:
        return 0


def mark_done(staging: Path, index: int, summary: Mapping[str, Any]) -> None:
    """Record partition ``index`` as finished (after its part-store is complete)."""
    _write_json(staging / f"{part_name(index)}.json", {"index": index, **summary})


def done_summary(staging: Path, index: int) -> dict[str, Any] | None:
    """What a finished partition reported, or None when it is not finished.

    Finished: its marker is there and, when it wrote rows, its part-store's manifest reads and
    every shard matches its checksum (a part-store altered since is redone).
    """
    try:
        summary = json.loads((staging / f"{part_name(index)}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if summary.get("rows"):
        part = staging / part_name(index)
        try:
            manifest = Manifest.read(part)
            for info in manifest.shards:
                if file_checksum(part / info.file, info.algorithm) != info.checksum:
                    raise ShardError(f"{part / info.file} does not match its checksum", path=part)
        except (StokerError, OSError):
            return None
        if manifest.num_rows != summary["rows"]:
            return None
    return dict(summary)


def done_parts(staging: Path, indices: Iterator[int] | list[int]) -> list[int]:
    """The partitions among ``indices`` whose marker is written (not checked: see :func:`done_summary`)."""
    return [i for i in indices if (staging / f"{part_name(i)}.json").is_file()]


def part_json(part: TextPart) -> dict[str, Any]:
    return asdict(part)


__all__ = [
    "TextPart",
    "attempts",
    "clear",
    "done_parts",
    "done_summary",
    "even_ranges",
    "load_plan",
    "mark_done",
    "materialize",
    "note_attempt",
    "part_json",
    "part_name",
    "plan_text",
    "save_plan",
    "scan_text_part",
    "staging_dir",
]
