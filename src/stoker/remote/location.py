"""One store URL and its fetcher, and every network call to it: timeouts, bounded retries, clean messages.

:func:`remote` makes the :class:`Remote` of a store URL: its fetcher (``registry.py``: the one
registered for the scheme, obstore for ``s3://``, ``gs://``, ``az://``, ``http(s)://``, fsspec otherwise) and its
options. Credentials come from where the client's own library looks (the environment, profiles)
and from ``storage_options=`` (fsspec's keys; the common s3fs ones are mapped for obstore); they
are never put in a message (:meth:`Remote.scrub`). :meth:`Remote.call` runs one network call with
bounded retries and backoff, counting each retry; each call has a timeout (connect and read
timeouts, set by the fetcher unless ``storage_options`` set them).
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stoker.errors import ConfigError, StokerError, StoreError, StoreNotFoundError
from stoker.remote.fetcher import Fetcher
from stoker.remote.registry import fetcher_for
from stoker.store.urls import as_url, is_remote, scheme

T = TypeVar("T")
ATTEMPTS = 4  # tries of one network call: the first and three retries
BACKOFF_S = 0.25  # the first retry waits this long, each next one twice as long
LOCAL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)  # the local disk's, not the network's
_NOT_TRANSIENT = (IsADirectoryError, NotADirectoryError, ValueError)
# an S3 error reply (obstore keeps the XML body) and botocore's form of one (fsspec)
_XML_ERROR = re.compile(r"<Code>([^<]{1,64})</Code>\s*<Message>([^<]{0,400})</Message>")
_PERFORMING = re.compile(r"Error performing \w+ \S+ in \S+ - ")
_BOTO_ERROR = re.compile(r"An error occurred \(([^)]{1,64})\) when calling the \w+ operation: ([^\n]{0,400})")


@dataclass
class Remote:
    """One store URL: its fetcher, its options, and a count of retries. Use :func:`remote` to make one."""

    url: str
    fetcher: Fetcher
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    retries: int = 0  # network calls retried after a transient failure, since this Remote was made
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def url_of(self, name: str) -> str:
        """The URL of object ``name`` of this store (for messages)."""
        return f"{self.url}/{name}"

    def scrub(self, text: str) -> str:
        """``text`` with every credential-looking value of ``storage_options`` replaced by ``***``."""
        for value in _secrets(self.storage_options):
            text = text.replace(value, "***")
        return text

    def describe(self, exc: BaseException) -> str:
        """An exception as ``Type: message`` on one line, scrubbed of credentials, at most 300 characters.

        obstore's messages end in a multi-line ``Debug source:`` dump; only what comes before it is kept.
        """
        text = str(exc).split("Debug source:", 1)[0]
        return self.scrub(f"{type(exc).__name__}: {' '.join(text.split())}")[:300]

    def reason(self, exc: BaseException) -> str:
        """What the server said, short: an S3 error's code and message where the reply (or the error it
        wraps) holds one, else :meth:`describe` cut to 160 characters."""
        text = " ".join(str(e) for e in _chain(exc))
        found = _XML_ERROR.search(text) or _BOTO_ERROR.search(text)
        if found is None:  # obstore's "Error performing GET <url> in 1.2ms - " repeats what the message says
            return _PERFORMING.sub("", self.describe(exc))[:160]
        code, message = found[1], " ".join(found[2].split())[:160]
        if code == "NoSuchBucket":
            return f"the bucket {self.url.split('://', 1)[1].split('/', 1)[0]} does not exist: create it or fix the URL"
        return self.scrub(f"{code}: {message}")

    def call(self, what: str, fn: Callable[[], T], attempts: int = ATTEMPTS) -> T:
        """``fn()``, retried with backoff after a transient failure (each retry counted in ``retries``).

        Every failure is a short StokerError with the client's error as its ``__cause__`` (credential
        errors aside, whose replies can echo a key): a missing object or bucket StoreNotFoundError (also
        FileNotFoundError), a refused access or another refusal StoreError, options the client does not
        take ConfigError, all at once; a call still failing after ``attempts`` tries is a StoreError
        naming ``what`` and the URL. Errors of the local disk (full, read-only) pass as they are.
        """
        for attempt in range(attempts):
            try:
                return fn()
            except StokerError:
                raise
            except FileNotFoundError as exc:
                raise StoreNotFoundError(f"{what}: not found ({self.reason(exc)})") from exc
            except PermissionError as exc:
                raise StoreError(
                    f"{what}: access was refused ({self.describe(exc)}); check the credentials: the environment "
                    "(AWS_ACCESS_KEY_ID, ...), the profile (AWS_PROFILE) or storage_options=",
                ) from None
            except Exception as exc:
                if _no_credentials(exc):  # no retry finds credentials that are not there
                    raise StoreError(
                        f"{what}: access was refused: no usable credentials for {self.url} "
                        f"({self.describe(exc)}); {_where_credentials(self.url)}",
                    ) from None
                if isinstance(exc, OSError) and exc.errno in LOCAL_ERRNOS:  # the local disk (full, read-only)
                    raise
                if isinstance(exc, TypeError):  # fsspec's client given an option it does not take
                    raise ConfigError(
                        f"{what}: the client refused the options ({self.reason(exc)}); check storage_options",
                        option="storage_options",
                    ) from exc
                if isinstance(exc, _NOT_TRANSIENT):
                    raise StoreError(f"{what}: the object store refused it ({self.reason(exc)})") from exc
                error: Exception = exc  # a connection refused or reset, a timeout, a 5xx: worth another try
            if attempt + 1 == attempts:
                raise StoreError(
                    f"{what}: failed {attempts} times, the last with {self.reason(error)}; check that the object "
                    f"store at {self.url} is reachable (endpoint, network), then run again",
                ) from error
            with self._lock:
                self.retries += 1
            time.sleep(BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover


# botocore's errors for credentials that are absent or named wrongly; no retry cures them
_CREDENTIAL_ERRORS = ("NoCredentialsError", "PartialCredentialsError", "ProfileNotFound", "CredentialRetrievalError")
# the cloud metadata endpoints (EC2 instance metadata, ECS task role) obstore asks when nothing else gives credentials
_METADATA_HOSTS = ("169.254.169.254", "169.254.170.2", "[fd00:ec2::254]")


def _no_credentials(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says that no credentials were found, rather than a network fault.

    fsspec (botocore) raises one of :data:`_CREDENTIAL_ERRORS`; obstore, with no key in the environment or the
    options, falls back to the instance-metadata endpoint, which fails off a cloud instance: its error names
    that endpoint.
    """
    return any(
        type(e).__name__ in _CREDENTIAL_ERRORS or any(host in str(e) for host in _METADATA_HOSTS) for e in _chain(exc)
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the few errors it wraps (``__cause__``, else ``__context__``), at most 5."""
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < 5:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def _where_credentials(url: str) -> str:
    """Where the client of ``url`` takes credentials from, as the advice of an error message."""
    if scheme(url) in ("s3", "s3a"):
        return (
            "give them in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), a profile that exists "
            "(AWS_PROFILE, in ~/.aws/credentials or ~/.aws/config) or storage_options with 'key' and 'secret' "
            "(CLI: --storage-option key=... --storage-option secret=...); a public bucket needs none: storage_options "
            "with 'anon': True (CLI: --storage-option anon=true)"
        )
    return "give them as the client library of this scheme reads them (its environment variables) or in storage_options"


def _secrets(options: Mapping[str, Any]) -> list[str]:
    """String values of ``options`` (nested too) that could be credentials: 4 characters or more."""
    found: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            found += _secrets(value)
        elif isinstance(value, str) and len(value) >= 4 and key not in ("endpoint_url", "region_name"):
            found.append(value)
    return sorted(found, key=len, reverse=True)


def remote(url: str, storage_options: Mapping[str, Any] | None = None, client: str | None = None) -> Remote:
    """The :class:`Remote` of store URL ``url``; ConfigError when no fetcher serves its scheme.

    ``client`` (``"fsspec"``) overrides ``STOKER_REMOTE_CLIENT``: a process forked from one that ran
    obstore asks for fsspec, because obstore's runtime threads do not survive a fork (its calls hang there).
    """
    if scheme(url) is None:
        raise ConfigError(f"{url!r} is not a URL (scheme://...)", option="path")
    url = as_url(url).rstrip("/")
    if not url.split("://", 1)[1].strip("/") and scheme(url) != "memory":
        raise StoreNotFoundError(f"{url} names no store: give the bucket and prefix (s3://bucket/prefix)")
    options = dict(storage_options or {})
    return Remote(url, fetcher_for(url, options, client), options)


def remote_kwargs(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"storage_options": ...}`` for a writer of URL ``path``; ``{}`` without options; ConfigError for a local path."""
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping):
        raise ConfigError(f"storage_options must be a mapping, not {storage_options!r}", option="storage_options")
    if not is_remote(path):
        raise ConfigError(
            f"storage_options were given, but {os.fspath(path)} is a local path: they are for an object-store URL "
            "(s3://bucket/prefix); drop them or give a URL",
            option="storage_options",
        )
    return {"storage_options": dict(storage_options)}


__all__ = ["ATTEMPTS", "Remote", "remote", "remote_kwargs"]
