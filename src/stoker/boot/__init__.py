"""Hooks run inside another Python process from its start: ``stoker doctor``'s instrumentation, ``stoker tune``'s trials.

:func:`child_env` puts ``_path/`` first on PYTHONPATH and names the hooks in ``STOKER_BOOT``; the
``sitecustomize.py`` there runs them in every Python process of the command (spawned workers
included). A hook is ``"TARGET:FUNCTION"`` under a key: ``""`` runs it at start-up, a top-level module
name (``"torch"``, ``"stoker"``) right after that module is imported (at once if it already is), with
the module as its argument. TARGET is a ``.py`` file, loaded by path once per process as
``_stoker_boot_NAME`` (the script has imported nothing yet, so such a file imports only the standard
library; it loads its own siblings with ``sys.modules["_stoker_boot"].load(path)``), or a module name,
imported when the hook runs.

The package imports nothing of stoker: the doctor and tune both start their code in the script's
process through it, and neither imports the other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from stoker.settings import BOOT_ENV

PATH = Path(__file__).resolve().parent / "_path"

__all__ = ["PATH", "child_env"]


def child_env(hooks: Mapping[str, Sequence[str]], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``hooks`` to run in the child Python."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PATH), env.get("PYTHONPATH", "")) if p)
    env[BOOT_ENV] = json.dumps({name: list(targets) for name, targets in hooks.items()})
    return env
