"""``stoker.merge(parts, out)``: part-stores joined into one store, shards put in place, one manifest last.

Each part is a complete local store (its ``manifest.json`` written). The merged store holds the
parts' rows in the order the parts are given: part 0's shards first, renumbered
``shard-00000.arrow``, ``shard-00001.arrow``, ... Shards are hard-linked into a hidden working
directory beside ``out`` (copied when the part lies on another file system), so the parts stay
whole until the merged store is in place: a merge that is killed loses nothing, and running it again
starts over (``replace.py`` sweeps the dead merge's directory). The manifest is written last and the
directory moved into place atomically (``replace_dir``): ``out`` is never visible half-merged.

What must agree, else an error names the part and what differs:

- the schema: the same columns, each of the same kind, dtype and shape (SchemaError naming the
  part and the column);
- the label code space: a text store's label names (``metadata["stoker.text"]["label_names"]``)
  and an image store's classes (``metadata["classes"]``) must be the same list in every part, since
  the label columns hold codes into it (SchemaError naming the parts and both lists). Merge does not
  re-code labels, which would rewrite every shard: convert the parts with one map
  (``label_names=`` for text; one class list for images), as the Ray conversion does;
- the metadata: every top-level key must have one value in all parts, except the counters of what
  a conversion left out (:data:`COUNTERS`, summed) and the list of skipped files (joined, at most
  :data:`MAX_SKIPPED` kept). A key whose values differ is a ConfigError unless ``metadata=`` gives
  that key's value for the merged store (``metadata`` entries replace the parts' keys).

Rows that record where they came from (a text store's ``line`` column) keep the values their part
wrote: the Ray conversion (``stoker.convert.on_ray``) writes each partition's lines already offset
into the whole input; parts converted on their own keep their own numbering.

``verify=True`` (the default) checks every shard's checksum before its link or copy is kept.

``stoker.merge`` takes an object-store URL for ``out`` too: ``stoker/remote/merge.py`` uploads the
parts' shards there, after the same checks (:func:`plan`).
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, EmptyDatasetError, SchemaError, ShardError, StoreExistsError, StoreWriteError
from stoker.store.format import SHARD_PATTERN, Column, Manifest, ShardInfo
from stoker.store.replace import hidden_dir, recover, remove_tree, replace_dir, sweep
from stoker.store.shardfile import shard_problem
from stoker.store.urls import is_remote

COUNTERS = ("skipped_empty", "replaced_lines", "cut_lines", "skipped_count", "ignored_count")
MAX_SKIPPED = 1000  # skipped files listed in a merged manifest (as a conversion lists them)
TEXT_KEY = "stoker.text"  # the text converter's metadata key (``text.batches.METADATA_KEY``)

PathLike = str | os.PathLike[str]


def merge(
    parts: Sequence[PathLike],
    out: PathLike,
    *,
    overwrite: bool = False,
    metadata: Mapping[str, Any] | None = None,
    verify: bool = True,
) -> Path:
    """Join the stores ``parts`` (in this order) into one new store in the local directory ``out``; return its path.

    Args:
        parts: local store directories, each complete; their rows appear in this order.
        out: the merged store's directory; must not exist unless ``overwrite=True``.
        overwrite: replace an existing store at ``out`` (atomically, as ``stoker.write`` does).
        metadata: entries of the merged manifest's metadata that replace the parts' (needed for
            keys whose values differ between parts).
        verify: check each shard's checksum as it is linked, copied or uploaded (a ShardError names a bad one).

    The parts are left as they are (their shards are hard links of the merged store's where the
    file system allows): delete them when the merged store is no longer in doubt.
    """
    dest = Path(out)
    paths, manifests, head = plan(parts, metadata, dest)
    recover(dest)
    sweep(dest)
    if os.path.lexists(dest) and not overwrite:
        raise StoreExistsError(f"{dest} exists; pass overwrite=True to replace it", path=dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = hidden_dir(dest, "tmp")
    tmp.mkdir()
    try:
        shards = _place_shards(paths, manifests, tmp, verify)
        Manifest(head.schema, tuple(shards), head.metadata).write(tmp)
        replace_dir(tmp, dest, overwrite)
    except BaseException:
        remove_tree(tmp)
        raise
    return dest


def plan(
    parts: Sequence[PathLike], metadata: Mapping[str, Any] | None, dest: Path | None = None
) -> tuple[list[Path], list[Manifest], Manifest]:
    """The parts' paths and manifests, checked to agree (see the module docstring), and the merged
    manifest's schema and metadata (a Manifest with no shards yet). ``dest``: a local merged store,
    which no part may be, nor lie in."""
    if isinstance(parts, (str, bytes, os.PathLike)) or not isinstance(parts, Sequence):
        raise ConfigError(f"parts is a list of store directories, not {parts!r:.100}", option="parts")
    if not parts:
        raise EmptyDatasetError("merge was given no parts; pass at least one store")
    for p in parts:
        if is_remote(p):
            raise ConfigError(
                f"{p} is a URL; the parts of stoker.merge are local (or mounted, shared) store directories "
                "(the merged store may be a URL)",
                option="parts",
            )
    paths = [Path(p) for p in parts]
    if dest is not None:
        _refuse_overlap(paths, dest)
    manifests = [read_part(p) for p in paths]
    schema = _agreed_schema(paths, manifests)
    _check_labels(paths, manifests)
    return paths, manifests, Manifest(schema, (), _merged_metadata(paths, manifests, dict(metadata or {})))


def _refuse_overlap(parts: list[Path], dest: Path) -> None:
    seen: set[Path] = set()
    target = dest.resolve()
    for p in parts:
        resolved = p.resolve()
        if resolved in seen:
            raise ConfigError(f"part {p} is given twice (its rows would appear twice)", option="parts")
        seen.add(resolved)
        if resolved == target or target in resolved.parents:
            raise ConfigError(
                f"part {p} lies in the merged store {dest}; write the merged store elsewhere", option="out"
            )


def read_part(part: Path) -> Manifest:
    manifest = Manifest.read(part)  # ManifestError: not a store, or its writer did not finish
    for info in manifest.shards:
        path = part / info.file
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ShardError(
                f"part {part}: shard {info.file} listed in its manifest is missing; convert that part again",
                path=path,
            ) from None
        if size != info.bytes:
            raise ShardError(
                f"part {part}: shard {info.file} has {size} bytes, its manifest says {info.bytes}; "
                "convert that part again",
                path=path,
            )
    return manifest


def _describe(col: Column) -> str:
    return ", ".join(f"{k} {v}" for k, v in col.to_json().items())


def _agreed_schema(parts: list[Path], manifests: list[Manifest]) -> dict[str, Column]:
    """The first part's schema, once every other part is found to have the same one."""
    first = manifests[0].schema
    for part, manifest in zip(parts[1:], manifests[1:], strict=True):
        for name in [*first, *(n for n in manifest.schema if n not in first)]:
            mine, theirs = manifest.schema.get(name), first.get(name)
            if mine is None or theirs is None:
                has, lacks = (parts[0], part) if mine is None else (part, parts[0])
                raise SchemaError(
                    f"part {part}: column {name!r} is in {has} but not in {lacks}; parts of one store have the "
                    "same columns (convert them with the same options)",
                    column=name,
                )
            if mine != theirs:
                raise SchemaError(
                    f"part {part}: column {name!r} is ({_describe(mine)}), in {parts[0]} it is ({_describe(theirs)}); "
                    "parts of one store have the same column types (convert them with the same options)",
                    column=name,
                )
        if list(manifest.schema) != list(first):
            raise SchemaError(
                f"part {part}: columns in the order {list(manifest.schema)}, {parts[0]} has {list(first)}",
                column=None,
            )
    return dict(first)


def _label_space(manifest: Manifest) -> tuple[str, Any] | None:
    """(label column, names) of a store whose labels are codes into a list of names, else None."""
    text = manifest.metadata.get(TEXT_KEY)
    if isinstance(text, Mapping) and "labels" in manifest.schema:
        return "labels", text.get("label_names")
    if "classes" in manifest.metadata and "label" in manifest.schema:
        return "label", manifest.metadata.get("classes")
    return None


def _check_labels(parts: list[Path], manifests: list[Manifest]) -> None:
    first = _label_space(manifests[0])
    for part, manifest in zip(parts[1:], manifests[1:], strict=True):
        mine = _label_space(manifest)
        if mine != first:
            column = (mine or first or ("labels", None))[0]
            raise SchemaError(
                f"part {part}: column {column!r} codes labels by the names {None if mine is None else mine[1]}, "
                f"{parts[0]} by {None if first is None else first[1]}; the same code would mean different labels. "
                "Convert every part with one label map (label_names=[...] with every name, sorted as a "
                "whole-input conversion numbers them)",
                column=column,
            )


def _merged_metadata(parts: list[Path], manifests: list[Manifest], given: dict[str, Any]) -> dict[str, Any]:
    """The parts' metadata as one: equal keys kept, counters summed, skipped lists joined; ``given`` on top."""
    out: dict[str, Any] = {}
    keys: list[str] = []
    for m in manifests:
        keys.extend(k for k in m.metadata if k not in keys)
    for key in keys:
        if key in given:
            continue
        values = [m.metadata.get(key) for m in manifests]
        out[key] = _combine(key, values, parts, key)
    out.update(given)
    return out


def _combine(key: str, values: list[Any], parts: list[Path], top: str, where: str = "") -> Any:
    """One metadata value from the parts' ``values`` of ``key`` (``top``: its top-level key, ``where``: the path to it)."""
    name = f"{where}{key}"
    if key in COUNTERS and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return sum(values)
    if key == "skipped" and all(isinstance(v, list) for v in values):
        return [item for v in values for item in v][:MAX_SKIPPED]
    if all(isinstance(v, Mapping) for v in values):
        inner: list[str] = []
        for v in values:
            inner.extend(k for k in v if k not in inner)
        return {k: _combine(k, [v.get(k) for v in values], parts, top, f"{name}.") for k in inner}
    for part, value in zip(parts[1:], values[1:], strict=True):
        if value != values[0]:
            raise ConfigError(
                f"part {part}: metadata {name!r} is {value!r:.100}, in {parts[0]} it is {values[0]!r:.100}; "
                f"pass metadata={{{top!r}: ...}} to say what the merged store records",
                option="metadata",
            )
    return values[0]


def _place_shards(parts: list[Path], manifests: list[Manifest], tmp: Path, verify: bool) -> list[ShardInfo]:
    shards: list[ShardInfo] = []
    for part, manifest in zip(parts, manifests, strict=True):
        for info in manifest.shards:
            src = part / info.file
            target = tmp / SHARD_PATTERN.format(len(shards))
            _link_or_copy(src, target)
            if verify:
                check_checksum(part, info, target)
            shards.append(ShardInfo(target.name, info.rows, info.bytes, info.checksum, info.algorithm))
    return shards


def check_checksum(part: Path, info: ShardInfo, path: Path) -> None:
    problem = shard_problem(path, info)
    if problem:
        raise ShardError(
            f"part {part}: shard {info.file} has {problem}: it was altered or damaged; convert that part again",
            path=path,
        )


def _link_or_copy(src: Path, target: Path) -> None:
    try:
        try:
            os.link(src, target)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            shutil.copyfile(src, target)  # another file system, or one without hard links
    except OSError as exc:
        raise StoreWriteError.from_os_error(exc, target) from exc


__all__ = ["COUNTERS", "MAX_SKIPPED", "check_checksum", "merge", "plan", "read_part"]
