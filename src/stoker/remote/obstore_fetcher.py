"""The obstore fetcher: the default for ``s3://``, ``gs://``, ``az://``, ``https://`` and ``http://`` stores.

It serves a store wherever it can take the store's credentials and options (the speed against
s3fs: ``benchmarks/bench_object_clients.py``, docs/design-notes.md); where it cannot, :func:`obstore_fetcher` raises ``Unfit`` and
fsspec serves the store (``registry.py``; ``STOKER_REMOTE_CLIENT=obstore`` makes that a ConfigError
naming the key instead):

- an AWS profile (``AWS_PROFILE``, ``storage_options={"profile": ...}``, or ``~/.aws`` files
  with no key in the environment or the options): obstore reads no profiles;
- ``storage_options`` keys with no obstore equivalent (only s3fs's ``key``, ``secret``,
  ``token``, ``endpoint_url``, ``anon``, ``client_kwargs.region_name``/``endpoint_url`` and
  ``config_kwargs.connect_timeout``/``read_timeout`` map across; for the other schemes no
  options map, so any option keeps fsspec).

A web server that takes no Range header (``python -m http.server``) gets one streamed GET per
shard once it has refused the first ranged one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from stoker.remote.fetcher import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, Fetcher, Unfit
from stoker.store.urls import scheme

T = TypeVar("T")
OBSTORE_SCHEMES = ("s3", "s3a", "gs", "az", "http", "https")
RANGE_BYTES = 8 * 2**20  # the size of one ranged GET of a download (obstore; a multiple of BLOCK)
RANGES_AT_ONCE = 4  # ranged GETs of one download in flight (and in memory) at once
STREAM_CHUNK = 2**20  # the least a streamed GET hands back at once (obstore gathers smaller network reads)
BLOCK = 4 * 2**20  # downloads are written one aligned block of the file per write() (see _AlignedWrites)
_S3_KEYS = {"key": "access_key_id", "secret": "secret_access_key", "token": "session_token", "endpoint_url": "endpoint"}


class ObstoreFetcher(Fetcher):
    """The objects of one store through an obstore store (its prefix is the store's root)."""

    name = "obstore"

    def __init__(self, store: Any) -> None:
        self.store = store
        self.ranged = True  # False once the server refused a Range header (a plain web server may)

    def read(self, name: str) -> bytes:
        import obstore

        return _translated(lambda: bytes(obstore.get(self.store, name).bytes()))

    def download(
        self, name: str, local: Path, size: int | None = None, seen: Callable[[memoryview], None] | None = None
    ) -> None:
        """The object into ``local``: ranged GETs of :data:`RANGE_BYTES` when ``size`` is known (up to
        :data:`RANGES_AT_ONCE` at once), else, or where the server takes no ranges, one streamed GET.

        The pieces are written as they arrive and handed to ``seen`` (a checksum taken on the
        way: the file is never read back). Ranges start on :data:`BLOCK` boundaries, so each piece is
        written straight from obstore's buffer; a stream's pieces, cut by the network, are copied
        into aligned blocks first.
        """
        import obstore
        from obstore.exceptions import NotSupportedError

        def run() -> None:
            fd = os.open(local, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)  # made by the cache
            try:
                out = _AlignedWrites(fd, seen)
                ranged = bool(size) and self.ranged
                starts = list(range(0, size or 0, RANGE_BYTES)) if ranged else []
                for g in range(0, len(starts), RANGES_AT_ONCE):
                    group = starts[g : g + RANGES_AT_ONCE]
                    ends = [min(s + RANGE_BYTES, size or 0) for s in group]
                    try:
                        ranges = obstore.get_ranges(self.store, name, starts=group, ends=ends, coalesce=0)
                    except NotSupportedError:
                        if g:  # the server took this object's first ranges
                            raise
                        self.ranged = ranged = False  # said before any byte: one streamed GET, now and later
                        break
                    for end, piece in zip(ends, ranges):
                        out.add(memoryview(piece), last=end == size)
                if not ranged:
                    for chunk in obstore.get(self.store, name).stream(min_chunk_size=STREAM_CHUNK):
                        out.add(memoryview(chunk))
                out.flush()
            finally:
                os.close(fd)

        _translated(run)

    def upload(self, local: Path, name: str) -> None:
        import obstore

        _translated(lambda: obstore.put(self.store, name, Path(local)))

    def size(self, name: str) -> int:
        import obstore

        return _translated(lambda: int(obstore.head(self.store, name)["size"]))

    def delete(self, name: str) -> None:
        import obstore

        _translated(lambda: obstore.delete(self.store, name))

    def list(self) -> list[tuple[str, int]]:
        import obstore

        try:
            return _translated(lambda: [(m["path"], int(m["size"])) for b in obstore.list(self.store) for m in b])
        except Exception as exc:  # noqa: BLE001 - obstore's list error is generic; a missing bucket is not transient
            if "NoSuchBucket" in str(exc):
                raise FileNotFoundError(str(exc)) from None
            raise

    def read_range(self, name: str, start: int, stop: int) -> bytes:
        import obstore

        return _translated(lambda: bytes(obstore.get_range(self.store, name, start=start, end=stop)))


class _AlignedWrites:
    """Pieces of a file written in order so that each aligned :data:`BLOCK` of it is one ``write()``.

    The page cache then keeps each aligned 2 MiB of a cached shard as one large folio, which a
    reader's map takes as one huge-page entry, as it does for a store written locally
    (``shardfile.slices``); pieces as the network cuts them would leave most blocks in small
    folios. Pieces are gathered into one block-sized buffer; whole blocks that arrive aligned are
    written straight from the piece. Each written piece goes to ``seen`` first.
    """

    def __init__(self, fd: int, seen: Callable[[memoryview], None] | None) -> None:
        self.fd, self.seen = fd, seen
        self.buf = memoryview(bytearray(BLOCK))
        self.fill = 0
        self.copied = 0  # bytes that went through the block buffer (a copy in Python, holding the GIL)

    def add(self, piece: memoryview, last: bool = False) -> None:
        """Write ``piece``, the next bytes of the file; ``last``: the file ends with it."""
        if last and self.fill == 0:  # at a block boundary, the file's end: one write, no copy
            self._out(piece)
            return
        while piece:
            if self.fill == 0 and len(piece) >= BLOCK:  # at a block boundary: whole blocks need no copy
                n = len(piece) - len(piece) % BLOCK
                self._out(piece[:n])
                piece = piece[n:]
                continue
            k = min(BLOCK - self.fill, len(piece))
            self.buf[self.fill : self.fill + k] = piece[:k]
            self.fill += k
            self.copied += k
            piece = piece[k:]
            if self.fill == BLOCK:
                self.flush()

    def flush(self) -> None:
        """Write what the buffer holds (the file's last, short block)."""
        if self.fill:
            self._out(self.buf[: self.fill])
            self.fill = 0

    def _out(self, view: memoryview) -> None:
        if self.seen is not None:
            self.seen(view)
        while view:
            view = view[os.write(self.fd, view) :]


def _translated(fn: Callable[[], T]) -> T:
    """``fn()``, obstore's missing-object and refused-access errors raised as FileNotFoundError / PermissionError."""
    from obstore.exceptions import NotFoundError, PermissionDeniedError, UnauthenticatedError

    try:
        return fn()
    except NotFoundError as exc:
        raise FileNotFoundError(str(exc)) from None
    except (PermissionDeniedError, UnauthenticatedError) as exc:
        raise PermissionError(str(exc)) from None


def obstore_fetcher(url: str, options: Mapping[str, Any]) -> ObstoreFetcher:
    """The :class:`ObstoreFetcher` of store ``url``; ``Unfit`` saying why obstore cannot take this store
    (then fsspec does). stoker's connect and read timeouts are used where ``options`` set none."""
    protocol = str(scheme(url))
    if protocol not in OBSTORE_SCHEMES:
        raise Unfit(f"obstore does not serve {protocol}://")
    try:
        from obstore.store import from_url
    except ImportError:
        raise Unfit("obstore is not installed") from None
    client: dict[str, Any] = {}
    config: dict[str, Any] = {}
    if protocol in ("s3", "s3a"):
        config, client = _s3_config(options)
        endpoint = config.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT") or ""
        if endpoint.startswith("http://"):
            client["allow_http"] = True
        if "access_key_id" not in config and not config.get("skip_signature") and _aws_profile():
            raise Unfit("an AWS profile gives the credentials (obstore reads no profiles)")
    elif protocol == "http" and not options:
        client["allow_http"] = True
    elif options:
        raise Unfit(f"storage_options for {protocol}:// are fsspec's ({', '.join(sorted(options))})")
    client.setdefault("connect_timeout", timedelta(seconds=CONNECT_TIMEOUT_S))
    client.setdefault("read_timeout", timedelta(seconds=READ_TIMEOUT_S))
    try:
        make: Any = from_url  # one overload per scheme; the config built above is the scheme's
        store = make(url.rstrip("/"), config=config or None, client_options=client, retry_config={"max_retries": 0})
    except Exception as exc:  # noqa: BLE001 - obstore's configuration errors: fsspec is asked instead
        raise Unfit(f"obstore refused the configuration ({type(exc).__name__})") from None
    return ObstoreFetcher(store)


def _s3_config(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """s3fs ``storage_options`` as obstore's (S3 config, client options); ``Unfit`` naming a key with no equivalent."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for key, value in options.items():
        if key in _S3_KEYS:
            if value is not None:
                config[_S3_KEYS[key]] = str(value)
        elif key == "anon":
            config["skip_signature"] = bool(value)
        elif key == "client_kwargs" and isinstance(value, Mapping):
            for sub, v in value.items():
                if sub == "region_name":
                    config["region"] = str(v)
                elif sub == "endpoint_url":
                    config["endpoint"] = str(v)
                else:
                    raise Unfit(f"storage_options['client_kwargs'][{sub!r}] has no obstore equivalent")
        elif key == "config_kwargs" and isinstance(value, Mapping):
            for sub, v in value.items():
                if sub in ("connect_timeout", "read_timeout"):
                    client[sub] = timedelta(seconds=float(v))
                else:
                    raise Unfit(f"storage_options['config_kwargs'][{sub!r}] has no obstore equivalent")
        else:
            raise Unfit(f"storage_options[{key!r}] has no obstore equivalent")
    return config, client


def _aws_profile() -> bool:
    """Whether AWS credentials would come from a profile: ``AWS_PROFILE``, or ``~/.aws`` files with no key in the env."""
    if os.environ.get("AWS_PROFILE"):
        return True
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        return False
    files = (
        os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
        os.environ.get("AWS_CONFIG_FILE", "~/.aws/config"),
    )
    return any(Path(f).expanduser().is_file() for f in files)


__all__ = ["OBSTORE_SCHEMES", "ObstoreFetcher", "obstore_fetcher"]
