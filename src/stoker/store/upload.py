"""Writing a store to object storage: shards written locally, uploaded as each is finished, the manifest last.

``StoreWriter(URL)`` (and so ``stoker.write``, ``stoker.convert.*`` and ``stoker convert``) is a
:class:`RemoteStoreWriter`: the local writer's work (shards sized, checksummed, journaled)
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

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, EmptyDatasetError, StoreExistsError, StoreWriteError
from stoker.store.format import MANIFEST_NAME, Column, Manifest, ShardInfo
from stoker.store.journal import Fingerprint
from stoker.store.location import Remote, as_url, is_remote, remote
from stoker.store.remote import _parse_manifest
from stoker.store.writer import DEFAULT_SHARD_SIZE, StoreWriter


def remote_name(info: ShardInfo) -> str:
    """The object name of a shard in an uploaded store: its local name plus 16 hex of its checksum."""
    stem = info.file[: -len(".arrow")] if info.file.endswith(".arrow") else info.file
    return f"{stem}-{info.checksum[:16]}.arrow"


class RemoteStoreWriter(StoreWriter):
    """A :class:`StoreWriter` whose store goes to an object-store URL (see the module docstring).

    Takes the local writer's arguments, plus ``storage_options`` for fsspec (credentials,
    endpoint). ``url`` is the store's URL (``close()`` returns it as a path: ``stoker.open`` takes
    that back as the URL); ``path`` is the local directory the shards are written in first.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: Mapping[str, Column] | None = None,
        *,
        shard_size: int | str = DEFAULT_SHARD_SIZE,
        overwrite: bool = False,
        metadata: Mapping[str, Any] | None = None,
        staging: str | os.PathLike[str] | None = None,
        fingerprint: Fingerprint | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        if staging is not None and is_remote(staging):
            raise ConfigError(
                f"staging={os.fspath(staging)!r} is a URL; a resumable write to {as_url(path)} stages its shards in a "
                "local directory: give StoreWriter a local staging= path",
                option="staging",
            )
        self.remote: Remote = remote(os.fspath(path), storage_options)
        self.url = self.remote.url
        self._old = self._existing(overwrite)
        self._local = Path(tempfile.mkdtemp(prefix="stoker-upload-"))
        self._uploaded: set[str] = set()
        try:
            super().__init__(
                self._local / "store",
                schema,
                shard_size=shard_size,
                overwrite=overwrite,
                metadata=metadata,
                staging=staging,
                fingerprint=fingerprint,
            )
            for info in self._shards:  # resumed: upload what the killed run had not
                self._upload(info, resumed=True)
        except BaseException:
            shutil.rmtree(self._local, ignore_errors=True)
            raise

    def _existing(self, overwrite: bool) -> Manifest | None:
        """The manifest of the store now at the URL, or None; StoreExistsError without ``overwrite``."""
        where = f"checking {self.remote.url_of(MANIFEST_NAME)}"
        if not self.remote.call(where, lambda: self.remote.client.exists(MANIFEST_NAME)):
            return None
        if not overwrite:
            raise StoreExistsError(f"{self.url} holds a store; pass overwrite=True (--overwrite) to replace it")
        raw = self.remote.call(where, lambda: self.remote.client.read(MANIFEST_NAME))
        return _parse_manifest(bytes(raw), self.remote.url_of(MANIFEST_NAME))[0]

    def _upload(self, info: ShardInfo, resumed: bool = False) -> None:
        name = remote_name(info)
        url = self.remote.url_of(name)
        if resumed:
            try:
                size = self.remote.call(f"checking {url}", lambda: self.remote.client.size(name))
            except FileNotFoundError:
                size = None
            if size == info.bytes:
                self._uploaded.add(name)
                return
        local = self._tmpdir() / info.file
        self.remote.call(f"uploading {local} to {url}", lambda: self.remote.client.upload(local, name))
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
            if self._reserved:
                raise RuntimeError(f"{len(self._reserved)} reserved shard(s) were never committed")
            self._flush_rows()
            self._write_shard()
            if not self._shards:
                raise EmptyDatasetError(f"no rows were written to {self.url}; a store needs at least one row")
            shards = tuple(dataclasses.replace(info, file=remote_name(info)) for info in self._shards)
            manifest = Manifest(self._schema(), shards, self.metadata)
            part = self._local / MANIFEST_NAME
            try:
                part.write_text(json.dumps(manifest.to_json(), indent=2) + "\n", encoding="utf-8")
            except OSError as exc:
                raise StoreWriteError.from_os_error(exc, part) from exc
            self.remote.call(
                f"uploading the manifest {self.remote.url_of(MANIFEST_NAME)}",
                lambda: self.remote.client.upload(part, MANIFEST_NAME),
            )
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._delete_old({info.file for info in shards})
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)  # the store is in place: its local copy goes
        shutil.rmtree(self._local, ignore_errors=True)
        self._unlock()
        return Path(self.url)

    def _delete_old(self, keep: set[str]) -> None:
        """Delete the replaced store's shards (best effort: a leftover object is not part of any store)."""
        if self._old is None:
            return
        for info in self._old.shards:
            if info.file not in keep:
                try:
                    self.remote.client.delete(info.file)
                except Exception:  # noqa: BLE001 - an old shard left behind harms no reader
                    pass

    def abort(self) -> None:
        """Drop the write. Without ``staging``, the shards it uploaded are deleted (nothing names them)."""
        staged = self._staging is not None
        super().abort()
        if not staged:
            old = set() if self._old is None else {info.file for info in self._old.shards}
            for name in self._uploaded - old:
                try:
                    self.remote.client.delete(name)
                except Exception:  # noqa: BLE001 - the write failed already; an orphan object harms no reader
                    pass
        shutil.rmtree(self._local, ignore_errors=True)


__all__ = ["RemoteStoreWriter", "remote_name"]
