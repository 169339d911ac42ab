"""Writing a store to object storage: shards written locally, uploaded as each is finished, the manifest last.

``stoker.StoreWriter(URL)`` (and so ``stoker.write``, ``stoker.convert.*`` and ``stoker convert``)
is a :class:`RemoteStoreWriter`: the local writer's work (shards sized, checksummed, journaled)
happens in a local directory, a temporary one or ``staging=``, and each shard is uploaded as
soon as it is committed. The manifest is uploaded last, so a reader of the URL sees the old
store or the new one, never a part of one.

Uploaded shards are named after their content (``shard-00000-<16 hex of the checksum>.arrow``):
a new store never writes over a shard of the store it replaces, so the old manifest stays
readable until the new one takes its place; the old store's shards are deleted after that.

Resume: with ``staging=DIR`` a writer killed mid-way leaves its finished shards and journal in
``DIR``; the next writer on the same ``DIR`` and URL keeps them and uploads only those whose
object is missing or of the wrong size (a name carries its checksum, so an object of that name
and size is that shard). Without ``staging`` the local work is in a temporary directory that is
removed at the end; shards uploaded by a failed write are deleted, except those of a kill.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, StoreExistsError, StoreNotFoundError, StoreWriteError
from stoker.remote.location import Remote, remote
from stoker.remote.reader import parse_manifest
from stoker.store.format import MANIFEST_NAME, Column, Manifest, ShardInfo
from stoker.store.urls import as_url, is_remote
from stoker.store.writer import StoreWriter


def remote_name(info: ShardInfo) -> str:
    """The object name of a shard in an uploaded store: its local name plus 16 hex of its checksum."""
    stem = info.file[: -len(".arrow")] if info.file.endswith(".arrow") else info.file
    return f"{stem}-{info.checksum[:16]}.arrow"


def existing(r: Remote, overwrite: bool) -> Manifest | None:
    """The manifest of the store now at ``r``'s URL, or None; StoreExistsError without ``overwrite``.

    One GET of the manifest, made when a writer is created: a missing object is no store, but a
    missing bucket (S3's ``NoSuchBucket``, which a HEAD's empty reply cannot tell from a missing
    object) is a StoreNotFoundError now, before any row is written, as opening the URL is.
    """
    where = f"checking {r.url_of(MANIFEST_NAME)}"
    try:
        raw = r.call(where, lambda: r.fetcher.read(MANIFEST_NAME))
    except StoreNotFoundError as exc:
        if "NoSuchBucket" in "".join(traceback.format_exception(exc)):  # the code, in the client's error
            raise
        return None
    if not overwrite:
        raise StoreExistsError(f"{r.url} holds a store; pass overwrite=True (--overwrite) to replace it")
    return parse_manifest(bytes(raw), r.url_of(MANIFEST_NAME))[0]


def present(r: Remote, name: str, size: int) -> bool:
    """Whether object ``name`` is there with ``size`` bytes (a shard's name carries its checksum: it is that shard)."""
    try:
        return bool(r.call(f"checking {r.url_of(name)}", functools.partial(r.fetcher.size, name)) == size)
    except FileNotFoundError:
        return False


def upload(r: Remote, local: Path, name: str) -> None:
    """The local file ``local`` uploaded as object ``name``, retried as any network call."""
    r.call(f"uploading {r.url_of(name)}", functools.partial(r.fetcher.upload, local, name))


def publish(r: Remote, manifest: Manifest, scratch: Path, old: Manifest | None) -> None:
    """Upload ``manifest`` (written in ``scratch`` first): the store is in place. Then delete the shards of the
    ``old`` store it replaces that it does not list."""
    local = scratch / MANIFEST_NAME
    try:
        local.write_text(json.dumps(manifest.to_json(), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise StoreWriteError.from_os_error(exc, local) from exc
    r.call(f"uploading the manifest {r.url_of(MANIFEST_NAME)}", lambda: r.fetcher.upload(local, MANIFEST_NAME))
    keep = {info.file for info in manifest.shards}
    delete(r, [info.file for info in (old.shards if old is not None else ()) if info.file not in keep])


def delete(r: Remote, names: Iterable[str]) -> None:
    """Delete objects ``names``, best effort: an object no manifest lists is part of no store and harms no reader."""
    for name in names:
        try:
            r.fetcher.delete(name)
        except Exception:  # noqa: BLE001 - see the docstring
            pass


class RemoteStoreWriter(StoreWriter):
    """A :class:`StoreWriter` whose store goes to an object-store URL (see the module docstring).

    Takes the local writer's arguments, plus ``storage_options`` for its fetcher (credentials,
    endpoint). ``url`` is the store's URL (``close()`` returns it as a path: ``stoker.open`` takes
    that back as the URL); ``path`` is the local directory the shards are written in first.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: Mapping[str, Column] | None = None,
        *,
        overwrite: bool = False,
        staging: str | os.PathLike[str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        if staging is not None and is_remote(staging):
            raise ConfigError(
                f"staging={os.fspath(staging)!r} is a URL; a resumable write to {as_url(path)} stages its shards in a "
                "local directory: give StoreWriter a local staging= path",
                option="staging",
            )
        self.remote: Remote = remote(os.fspath(path), storage_options)
        self.url = self.remote.url
        self._old = existing(self.remote, overwrite)
        self._local = Path(tempfile.mkdtemp(prefix="stoker-upload-"))
        self._uploaded: set[str] = set()
        try:
            super().__init__(self._local / "store", schema, overwrite=overwrite, staging=staging, **options)
            for info in self._shards:  # resumed: upload what the killed run had not
                self._upload(info, resumed=True)
        except BaseException:
            shutil.rmtree(self._local, ignore_errors=True)
            raise

    def _upload(self, info: ShardInfo, resumed: bool = False) -> None:
        name = remote_name(info)
        if not (resumed and present(self.remote, name, info.bytes)):
            upload(self.remote, self._tmpdir() / info.file, name)
        self._uploaded.add(name)

    def commit_shard(self, task: Any) -> None:
        """Record a written shard (see :meth:`StoreWriter.commit_shard`) and upload it."""
        super().commit_shard(task)
        self._upload(self._shards[-1])

    def close(self) -> Path:
        """Write and upload what is buffered, then the manifest; delete the old store's shards. Returns the URL."""
        if self._closed:
            return Path(self.url)
        try:
            self._last_shard(self.url)
            shards = tuple(info._replace(file=remote_name(info)) for info in self._shards)
            publish(self.remote, Manifest(self._schema(), shards, self.metadata), self._local, self._old)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)  # the store is in place: its local copy goes
        shutil.rmtree(self._local, ignore_errors=True)
        self._unlock()
        return Path(self.url)

    def abort(self) -> None:
        """Drop the write. Without ``staging``, the shards it uploaded are deleted (nothing names them)."""
        staged = self._staging is not None
        super().abort()
        if not staged:
            old = set() if self._old is None else {info.file for info in self._old.shards}
            delete(self.remote, self._uploaded - old)
        shutil.rmtree(self._local, ignore_errors=True)


__all__ = ["RemoteStoreWriter", "delete", "existing", "present", "publish", "remote_name", "upload"]
