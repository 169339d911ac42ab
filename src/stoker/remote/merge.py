"""``stoker.merge(parts, URL)``: local part-stores joined into one store at an object-store URL.

The parts are checked as for a local merge (``store/merge.py``: :func:`~stoker.store.merge.plan`).
Each part's shards are uploaded as ``PART-shard-NNNNN-<16 hex of the checksum>.arrow`` (PART: the
part directory's name), skipping objects already there with the right size (a name carries its
checksum: a re-run, or parts uploaded by their own writers with :func:`upload_part`, upload nothing
twice), and the manifest is uploaded last: a reader sees the old store or the new one. A replaced
store's shards are deleted after its manifest is replaced.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError
from stoker.remote.location import Remote, remote
from stoker.remote.upload import existing, present, publish, remote_name, upload
from stoker.store.format import MANIFEST_NAME, Manifest, ShardInfo
from stoker.store.merge import check_checksum, plan, read_part


def url_holds_store(url: str, storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether a store's manifest is at ``url``."""
    r = remote(url, storage_options)
    return bool(r.call(f"checking {r.url_of(MANIFEST_NAME)}", lambda: r.fetcher.exists(MANIFEST_NAME)))


def upload_part(
    part: Path, url: str, storage_options: Mapping[str, Any] | None = None, verify: bool = True
) -> list[ShardInfo]:
    """Upload the shards of the store ``part`` to ``url`` under the names a merge into ``url`` gives them.

    Objects already there with the right size are kept. Returns the shards as the merged manifest
    lists them (the uploaded names).
    """
    return _upload(remote(url, storage_options), part, read_part(part), verify)


def _object_name(part: Path, info: ShardInfo) -> str:
    return f"{part.name.lstrip('.') or 'part'}-{remote_name(info)}"


def _upload(r: Remote, part: Path, manifest: Manifest, verify: bool) -> list[ShardInfo]:
    out = []
    for info in manifest.shards:
        name = _object_name(part, info)
        if not present(r, name, info.bytes):
            if verify:
                check_checksum(part, info, part / info.file)
            upload(r, part / info.file, name)
        out.append(ShardInfo(name, info.rows, info.bytes, info.checksum, info.algorithm))
    return out


def merge_to_url(
    parts: Sequence[str | os.PathLike[str]],
    url: str,
    *,
    overwrite: bool = False,
    metadata: Mapping[str, Any] | None = None,
    verify: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> Path:
    """Join the local stores ``parts`` into one new store at ``url`` (see the module docstring); return the URL."""
    paths, manifests, head = plan(parts, metadata)
    r = remote(os.fspath(url), storage_options)
    old = existing(r, overwrite)
    shards = [info for part, m in zip(paths, manifests, strict=True) for info in _upload(r, part, m, verify)]
    names = [info.file for info in shards]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(
            f"two parts hold the same shard {twice} under the same directory name; rename one", option="parts"
        )
    with tempfile.TemporaryDirectory(prefix="stoker-merge-") as tmp:
        publish(r, Manifest(head.schema, tuple(shards), head.metadata), Path(tmp), old)
    return Path(r.url)


__all__ = ["merge_to_url", "upload_part", "url_holds_store"]
