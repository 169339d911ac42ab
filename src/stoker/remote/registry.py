"""Which fetcher serves a store URL: a registry by URL scheme, obstore by default, fsspec as the fallback.

``register_fetcher(scheme, factory)`` makes ``factory(url, storage_options)`` the maker of the
:class:`~stoker.remote.fetcher.Fetcher` of every store whose URL has that scheme; nothing else in
stoker changes for a new scheme (``stoker.open``, ``stoker.write``, ``stoker.Loader`` and the cache
all go through the fetcher). Registered at import: obstore (``obstore_fetcher.py``) for ``s3://``,
``s3a://``, ``gs://``, ``az://``, ``https://`` and ``http://``. A scheme with no factory, and a store whose factory raises
``Unfit``, is served by fsspec (``fsspec_fetcher.py``).

``STOKER_REMOTE_CLIENT`` (read when a store is opened) chooses between the two built-in clients:
``auto`` (the default) as above, ``obstore`` (a store obstore cannot take is a ConfigError saying
why) or ``fsspec`` (fsspec even where obstore is registered). A factory registered by the user is
used whatever it says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from stoker.errors import ConfigError
from stoker.remote.fetcher import Fetcher, Unfit
from stoker.remote.fsspec_fetcher import fsspec_fetcher
from stoker.remote.obstore_fetcher import OBSTORE_SCHEMES, obstore_fetcher
from stoker.settings import env
from stoker.store.urls import scheme

CLIENT_ENV = "STOKER_REMOTE_CLIENT"
CLIENTS = ("auto", "obstore", "fsspec")
FetcherFactory = Callable[[str, Mapping[str, Any]], Fetcher]  # (store URL, storage_options) -> its fetcher
_FACTORIES: dict[str, FetcherFactory] = dict.fromkeys(OBSTORE_SCHEMES, obstore_fetcher)


def register_fetcher(scheme: str, factory: FetcherFactory) -> None:
    """Serve every store URL ``scheme://...`` with the fetcher ``factory(url, storage_options)`` makes."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.\-]*", scheme):
        raise ConfigError(f"{scheme!r} is not a URL scheme (letters, digits, +, -, .)", option="scheme")
    _FACTORIES[scheme.lower()] = factory


def choice() -> str:
    """``STOKER_REMOTE_CLIENT`` (read now): ``auto`` when unset; a ConfigError when it is not a client stoker has."""
    value = (env(CLIENT_ENV) or "auto").strip().lower() or "auto"
    if value not in CLIENTS:
        raise ConfigError(f"{CLIENT_ENV}={value!r}: use one of {', '.join(CLIENTS)}", option=CLIENT_ENV)
    return value


def fetcher_for(url: str, options: Mapping[str, Any], client: str | None = None) -> Fetcher:
    """The fetcher of store ``url`` (see the module docstring); ``client`` overrides ``STOKER_REMOTE_CLIENT``."""
    which = client or choice()
    factory = _FACTORIES.get(str(scheme(url)))
    if factory is obstore_fetcher and which == "fsspec":
        factory = None
    elif factory is None and which == "obstore":
        factory = obstore_fetcher  # it says why it does not serve this scheme
    if factory is not None:
        try:
            return factory(url, options)
        except Unfit as why:
            if which == "obstore" and factory is obstore_fetcher:
                raise ConfigError(
                    f"{url}: {CLIENT_ENV}=obstore, but {why}; unset it to use fsspec", option=CLIENT_ENV
                ) from None
    return fsspec_fetcher(url, options)


__all__ = ["CLIENT_ENV", "FetcherFactory", "choice", "fetcher_for", "register_fetcher"]
