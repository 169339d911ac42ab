"""Progress of the long steps of a text loader (the token count that bucketing needs).

``progress=None`` shows a tqdm bar on stderr when stderr is a terminal; ``True``/``False`` force
it on/off; a callable is called with the number of rows done since its last call instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from stoker.errors import ConfigError


class _Calls:
    """A callable in the shape of a bar: ``update(n)`` calls it with ``n``."""

    def __init__(self, fn: Callable[[int], Any]) -> None:
        self.fn = fn

    def update(self, n: int) -> None:
        if n:
            self.fn(int(n))

    def __enter__(self) -> _Calls:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def check_progress(progress: Any) -> None:
    """Refuse anything but None, True, False or a callable."""
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise ConfigError(
            f"progress must be None (a bar when stderr is a terminal), True, False or a callable taking a count, "
            f"not {progress!r}",
            option="progress",
        )


def progress_bar(progress: Any, total: int, desc: str) -> Any:
    """A context manager with ``update(n)``: a tqdm bar on stderr, or the user's callable."""
    check_progress(progress)
    if callable(progress) and not isinstance(progress, bool):
        return _Calls(progress)
    from tqdm.auto import tqdm

    show = sys.stderr.isatty() if progress is None else bool(progress)
    return tqdm(total=total, desc=desc, unit="rows", unit_scale=True, disable=not show, file=sys.stderr, leave=False)


__all__ = ["check_progress", "progress_bar"]
