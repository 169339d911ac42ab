"""Stores in object storage: URLs, fetchers by scheme, the local shard cache, uploads.

Built on ``stoker.store`` (its format, its ``Store`` read through a shard provider), never imported
by it. A new URL scheme is one ``register_fetcher(scheme, factory)`` call: see ``registry.py``.

The file map is ``README.md`` beside this file.
"""

from stoker.remote.fetcher import Fetcher, Unfit
from stoker.remote.reader import open_store
from stoker.remote.registry import register_fetcher
from stoker.remote.upload import RemoteStoreWriter

__all__ = ["Fetcher", "RemoteStoreWriter", "Unfit", "open_store", "register_fetcher"]
