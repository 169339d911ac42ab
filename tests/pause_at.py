"""Fault injection for the kill tests: ``python tests/pause_at.py POINT (-c CODE | SCRIPT) ARGS...``.

Runs the code (as ``python -c CODE ARGS`` or ``python SCRIPT ARGS`` would) with the point POINT patched
into stoker: when the code reaches it, this process writes ``paused: POINT`` to stderr and waits for
good, so that a test can SIGKILL it exactly there. The patches wrap stoker's own functions (the code
around them runs unchanged); a point the code never reaches makes the process end without the line,
which the test reports. Points:

- ``between-renames``: an overwrite with the old store hidden and the new one moved in (after
  ``replace.exchange`` swapped them), or between the two renames where the exchange is missing;
- ``shard-committed``: a resumable (``staging=``) write's journal records a shard;
- ``merge-shards-placed``: a local merge's shards are in its working directory, its manifest not yet.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
from collections.abc import Callable
from typing import Any


def pause(point: str) -> None:
    sys.stderr.write(f"paused: {point}\n")
    sys.stderr.flush()
    threading.Event().wait()


def _after(owner: Any, name: str, point: str, when: Callable[..., bool] = lambda *_: True) -> None:
    """Pause at ``point`` after ``owner.name(...)`` returns, when ``when(result, *args)`` holds."""
    real = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if when(result, *args):
            pause(point)
        return result

    setattr(owner, name, wrapped)


def _between_renames() -> None:
    from stoker.store import replace

    _after(replace, "exchange", "between-renames", lambda swapped, *_: swapped)
    _after(os, "rename", "between-renames", lambda _, src, dst: ".old-" in os.fspath(dst))


def _shard_committed() -> None:
    from stoker.store import writer

    _after(writer, "write_journal", "shard-committed", lambda _, staging, schema, shards, *rest: bool(shards))


def _merge_shards_placed() -> None:
    from stoker.store import merge

    _after(merge, "_place_shards", "merge-shards-placed")


POINTS = {
    "between-renames": _between_renames,
    "shard-committed": _shard_committed,
    "merge-shards-placed": _merge_shards_placed,
}


def main(argv: list[str]) -> None:
    point, *command = argv
    POINTS[point]()
    if command[0] == "-c":  # sys.argv and sys.path[0] as python -c CODE ARGS sets them
        sys.argv, sys.path[0] = ["-c", *command[2:]], ""
        exec(compile(command[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv, sys.path[0] = command, os.path.dirname(os.path.abspath(command[0]))
        runpy.run_path(command[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
