"""The settings ``stoker tune`` searches, their candidate values per kind of loader, and the constraints.

A *setting* is a dict of loader keywords (``{"num_workers": 2, "engine": "threads",
"prefetch_factor": 4}``), passed as they are to the loader. A :class:`Space` holds, for each
searched keyword, its candidate values in order; :meth:`Space.settings` lists the grid with the
constraints applied (``engine`` and ``prefetch_factor`` only matter with workers).

Only settings that change how fast batches come, never which rows or in what order, are searched
by default; those that change the batches or pixels (a text loader's ``pad_to_multiple_of`` and
``bucket_window``, an ``ImageSource``'s ``reduced_decode`` and ``decode_device``) and ``chunk_size``
only when named, and the CUDA-only ones (``pin_memory``, ``decode_device``) never on the CPU. The
notes of :func:`default_space` say why, to the user.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stoker.config import LoaderConfig
from stoker.errors import ConfigError
from stoker.pipeline.schedule import ENGINES, usable_cores
from stoker.text.loader import TextConfig
from stoker.text.source import DEFAULT_PAD_MULTIPLE
from stoker.vision.options import ImageOptions

KINDS = ("plain", "images", "text")
ALIASES = {"workers": "num_workers", "prefetch": "prefetch_factor", "pin": "pin_memory"}
# keywords of every loader, and of text loaders only
COMMON = ("num_workers", "engine", "prefetch_factor", "pin_memory")
TEXT_ONLY = ("pad_to_multiple_of", "bucket_window")
IMAGE_ONLY = ("reduced_decode", "decode_device")  # ImageSource options
CUDA_ONLY = ("pin_memory", "decode_device")
# what the loader does when a keyword is not given, read from the config objects (the search starts from
# the loader's own schedule, which replaces the first four: tuner.py, _schedule_keywords; without workers
# the engine is threads, and pinning is off on the CPU)
LOADER_DEFAULTS: dict[str, Any] = {
    "engine": ENGINES[0],
    "prefetch_factor": LoaderConfig.prefetch_factor,
    "pin_memory": False,
    "chunk_size": LoaderConfig.chunk_size,
    "pad_to_multiple_of": DEFAULT_PAD_MULTIPLE,
    "bucket_window": TextConfig.bucket_window,
    "reduced_decode": ImageOptions.reduced_decode,
    "decode_device": ImageOptions.decode_device,
}


def worker_counts(cores: int) -> tuple[int, ...]:
    """0, the cores (one worker per core: the loader's default), and powers of two up to twice the
    cores (0, 1, 2, 4 on 2 cores; ... 32 on 16)."""
    counts, n = {0, cores}, 1
    while n <= 2 * cores:
        counts.add(n)
        n *= 2
    return tuple(sorted(counts))


def candidates(kind: str, cores: int) -> dict[str, tuple[Any, ...]]:
    """Every keyword tune can search for a loader of ``kind``, with its candidate values in order."""
    values: dict[str, tuple[Any, ...]] = {
        "num_workers": worker_counts(cores),
        "engine": ENGINES,
        "prefetch_factor": (1, 2, 4, 8),
        "pin_memory": (False, True),
        "chunk_size": (None, 1, 4, 16),
    }
    if kind == "text":
        values["pad_to_multiple_of"] = (1, 8, 64)
        values["bucket_window"] = (25, 100, 400)
    if kind == "images":
        values["reduced_decode"] = (True, False)
        values["decode_device"] = ("cpu", "cuda")
    return values


def canonical(name: str) -> str:
    """The loader keyword of ``name`` (``workers`` is ``num_workers``, ``prefetch`` is ``prefetch_factor``)."""
    return ALIASES.get(name.strip(), name.strip())


@dataclass(frozen=True)
class Space:
    """Keywords searched and their candidate values, in the order the search visits them."""

    values: dict[str, tuple[Any, ...]]
    start: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def settings(self) -> list[dict[str, Any]]:
        """Every setting of the grid that the constraints keep, duplicates removed."""
        names = list(self.values)
        seen: list[dict[str, Any]] = []
        for combo in itertools.product(*(self.values[n] for n in names)):
            setting = normalize(dict(zip(names, combo)))
            if setting is not None and setting not in seen:
                seen.append(setting)
        return seen


def normalize(setting: dict[str, Any]) -> dict[str, Any] | None:
    """``setting`` with the keywords that do not apply dropped; None when the constraints exclude it.

    With ``num_workers=0`` the batches are read in the consumer's thread: ``engine`` and
    ``prefetch_factor`` do not apply (only their first values stand for them, others are excluded).
    """
    out = dict(setting)
    if out.get("num_workers") == 0:
        if out.get("engine", LOADER_DEFAULTS["engine"]) != LOADER_DEFAULTS["engine"]:
            return None
        if out.get("prefetch_factor", LOADER_DEFAULTS["prefetch_factor"]) != LOADER_DEFAULTS["prefetch_factor"]:
            return None
    return out


def default_space(kind: str, device: str = "cpu", cores: int | None = None, only: Iterable[str] | None = None) -> Space:
    """The space searched for a loader of ``kind`` on ``device``: its speed settings, or those in ``only``."""
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}", option="kind")
    cores = usable_cores() if cores is None else cores
    every = candidates(kind, cores)
    cuda = str(device).startswith("cuda")
    notes = []
    if only is None:
        names = [n for n in COMMON if n != "pin_memory" or cuda]
        if kind == "text":
            notes.append(
                "pad_to_multiple_of and bucket_window are not searched: they change the batches (padded width, "
                "which rows share a batch) and their cost is the training step's; name them with --only to search"
            )
        if kind == "images":
            notes.append(
                "reduced_decode and decode_device are not searched: they change the pixels (decode scale, "
                "the GPU's resampling); name them with --only to search"
            )
        notes.append("chunk_size is not searched: its default (about 1 MiB per task) is kept; name it with --only")
    else:
        names = check_names(only, kind, every)
    skipped = [n for n in CUDA_ONLY if not cuda and n in names]
    for name in skipped:
        names.remove(name)
        notes.append(f"{name} is skipped: it only matters with a CUDA device, and this one is the CPU")
    if not cuda and "pin_memory" not in skipped:
        notes.append("pin_memory is not searched: it only matters for copies to a CUDA device")
    return checked(Space({n: every[n] for n in names}, notes=tuple(notes)), kind)


def check_names(names: Iterable[str], kind: str, every: Mapping[str, Any]) -> list[str]:
    """``names`` as loader keywords; an unknown one is a ConfigError naming it and the known ones."""
    out: list[str] = []
    for raw in names:
        name = canonical(raw)
        if name not in every:
            extra = f" (text loaders also take {', '.join(TEXT_ONLY)})" if kind != "text" and name in TEXT_ONLY else ""
            if kind != "images" and name in IMAGE_ONLY:
                extra = f" (image loaders also take {', '.join(IMAGE_ONLY)})"
            raise ConfigError(
                f"unknown tune setting {raw!r} for a {kind} loader{extra}; the settings are "
                f"{', '.join(every)} (aliases: {', '.join(ALIASES)})",
                option=raw,
            )
        if name not in out:
            out.append(name)
    if not out:
        raise ConfigError("no tune setting named: name at least one, like num_workers", option="only")
    return out


def custom_space(
    kind: str, values: Mapping[str, Sequence[Any]] | Sequence[str], device: str = "cpu", cores: int | None = None
) -> Space:
    """A space from the Python API's ``space=``: names (their default candidates) or names to values."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Mapping):
        return default_space(kind, device, cores, only=list(values))
    every = candidates(kind, usable_cores() if cores is None else cores)
    names = check_names(values, kind, every)
    space = Space({canonical(k): tuple(v) for k, v in values.items()}, notes=())
    for name in names:
        check_values(name, space.values[name])
    return checked(space, kind)


def check_values(name: str, values: Sequence[Any]) -> None:
    """Each candidate of ``name`` is a value the loader takes; else a ConfigError naming it."""
    if not values:
        raise ConfigError(f"tune setting {name!r} has no candidate values", option=name)
    for v in values:
        if name == "engine":
            ok = v in ENGINES
        elif name == "decode_device":
            ok = v in ("cpu", "cuda")
        elif name in ("pin_memory", "reduced_decode"):
            ok = isinstance(v, bool)
        elif name == "chunk_size" and v is None:
            ok = True
        else:
            ok = isinstance(v, int) and not isinstance(v, bool) and v >= (0 if name == "num_workers" else 1)
        if not ok:
            raise ConfigError(f"tune setting {name!r} cannot take {v!r}", option=name)


def checked(space: Space, kind: str) -> Space:
    """``space`` if its grid keeps a setting after the constraints; else a ConfigError naming the settings."""
    if not space.settings():
        named = ", ".join(f"{k}={list(v)}" for k, v in space.values.items())
        raise ConfigError(
            f"the tune space of this {kind} loader is empty after its constraints ({named}): engine and "
            "prefetch_factor other than threads/2 need num_workers >= 1; add a worker count >= 1",
            option=next(iter(space.values)),
        )
    return space
