"""Every ``STOKER_*`` environment variable stoker reads, in one table, and :func:`env`, the one way to read them.

A variable is read when the code that needs it runs (:func:`env` looks it up then), never at import:
setting one in a running process takes effect from the next call that reads it. The values are
checked where they are used (each raises a ConfigError naming the variable). ``internal`` variables
are the protocol between a stoker parent and the Python it starts (``stoker doctor``, ``stoker
tune``): set by stoker, not by users.

``docs/reference/knobs.md`` is generated from :data:`SETTINGS` (``scripts/gen_reference.py``).
This module imports nothing (not even the rest of stoker): the doctor's hooks load it by path in a
script's Python before the script imports anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["BOOT_ENV", "SETTINGS", "Setting", "env"]


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default (in words), what it does, and who reads it."""

    name: str
    default: str
    meaning: str
    readers: str
    internal: bool = False


BOOT_ENV = "STOKER_BOOT"

SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "STOKER_CACHE_DIR",
            "`$XDG_CACHE_HOME/stoker`, else `~/.cache/stoker`",
            "Root of stoker's caches: the shard cache of remote stores (`cache_dir=` overrides it per store) "
            "and the staging directories of resumable `convert.dataset` runs (`staging/`).",
            "remote/cache.py, convert/from_dataset.py",
        ),
        Setting(
            "STOKER_REMOTE_CLIENT",
            "`auto`",
            "The object-store client of remote stores: `auto` (obstore where it can take the credentials, "
            "else fsspec), `obstore` (refuse what obstore cannot take) or `fsspec`.",
            "remote/registry.py",
        ),
        Setting(
            "STOKER_MAX_MAPPED_SHARDS",
            "half of `/proc/sys/vm/max_map_count` (at least 1024; 8192 where unknown)",
            "How many shards of one store stay memory-mapped at once (least recently used unmapped first); "
            "an integer >= 1.",
            "store/shards.py",
        ),
        Setting(
            "STOKER_TEXT_CACHE_MEMORY",
            "`1073741824` (1 GiB)",
            "Bytes an on-the-fly token cache array of `stoker.text.Loader` holds in memory before it moves to "
            "a mapped temporary file; `0` always spills.",
            "text/spill.py",
        ),
        Setting(
            "STOKER_MEMORY_LIMIT",
            "unset (the cgroup memory limit, else physical RAM)",
            'The memory `shuffle="block"` sizes its window to when `block_size`/`window` are not given; '
            "a size such as `8GB`.",
            "pipeline/blocks.py",
        ),
        Setting(
            BOOT_ENV,
            "unset",
            "JSON: the hooks `stoker.boot` runs in a child Python (at start-up, or after a module's import).",
            "boot/_path/sitecustomize.py",
            internal=True,
        ),
        Setting(
            "STOKER_DOCTOR_EVENTS",
            "unset",
            "`stoker doctor`: the directory the script's processes write their events to.",
            "doctor/child.py",
            internal=True,
        ),
        Setting(
            "STOKER_DOCTOR_INTERVAL",
            "`0.5`",
            "`stoker doctor`: seconds between two resource samples (`--interval`).",
            "doctor/child.py",
            internal=True,
        ),
        Setting(
            "STOKER_DOCTOR_INSPECT",
            "`4`",
            "`stoker doctor`: batches described per loader (`--inspect-batches`).",
            "doctor/child.py",
            internal=True,
        ),
        Setting(
            "STOKER_DOCTOR_PROBE",
            "`1`",
            "`stoker doctor`: `0` skips the probes of the script's datasets.",
            "doctor/child.py",
            internal=True,
        ),
        Setting(
            "STOKER_TUNE_TRIAL",
            "unset",
            "`stoker tune -- cmd`: JSON naming the trial's setting, its result file and how it ends.",
            "tune/inject.py",
            internal=True,
        ),
    )
}


def env(name: str) -> str | None:
    """The value of the registered variable ``name`` now; None when it is unset or empty."""
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a registered stoker variable: add it to stoker/settings.py's SETTINGS")
    return os.environ.get(name) or None
