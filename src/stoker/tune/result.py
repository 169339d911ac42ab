"""What a tune run found: every trial, the best setting and its loader call, the limits, as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stoker.tune.compare import Comparison
from stoker.tune.limits import Limits
from stoker.tune.trial import Trial


@dataclass(frozen=True)
class TuneResult:
    """The outcome of :func:`stoker.tune.tune`.

    Attributes:
        store: the store's path.
        kind: ``plain``, ``images`` or ``text`` (the loader the store is trained with).
        loader: one line naming that loader.
        batch_size, step_ms, trial_batches: how each trial ran.
        method: ``"coordinate descent"`` or ``"grid"``.
        trials: every trial in order; the first is the loader's defaults.
        defaults_setting: the setting of the defaults' trial (``{}``: no keyword given).
        best: the fastest trial that did not fail (None when all failed).
        call: the exact ``stoker.Loader(...)`` call of ``best``.
        limits: the bounds the best rate is compared with.
        space: the keywords searched and their candidates.
        notes: settings left out and why.
        interrupted: True when Ctrl-C ended the search (``best`` is the best so far).
        command: the script run by each trial (``stoker tune -- python train.py``), else None.
        search_seconds: wall seconds of the search: every loader it built and every trial it ran
            (the confirming ones included), the limits' trial left out; None when not timed.
        versus_defaults: the best setting against the defaults in interleaved warm rounds of equal
            trials (``compare.py``); None when the defaults are the best, did not run, or the search
            was interrupted. The only figure said against the defaults.
    """

    store: str
    kind: str
    loader: str
    batch_size: int
    step_ms: float
    trial_batches: int
    method: str
    trials: list[Trial]
    defaults_setting: dict[str, Any]
    best: Trial | None
    call: str | None
    limits: Limits | None
    space: dict[str, list[Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    interrupted: bool = False
    command: list[str] | None = None
    search_seconds: float | None = None
    versus_defaults: Comparison | None = None

    @property
    def defaults(self) -> Trial | None:
        """The loader's defaults' trial (its rate the mean of its trials), when it ran."""
        mine = [t for t in self.trials if t.setting == self.defaults_setting]
        if not mine:
            return None
        rates = [t.rate or 0.0 for t in mine]
        return replace(mine[0], rate=sum(rates) / len(rates)) if len(mine) > 1 else mine[0]

    @property
    def share_of_limit(self) -> float | None:
        """The best rate over the limit (None when either is unknown)."""
        limit = self.limits.limit if self.limits else None
        if self.best is None or self.best.rate is None or not limit:
            return None
        return self.best.rate / limit

    def to_json(self) -> dict[str, Any]:
        d = self.defaults
        return {
            "store": self.store,
            "kind": self.kind,
            "loader": self.loader,
            "batch_size": self.batch_size,
            "step_ms": self.step_ms,
            "trial_batches": self.trial_batches,
            "method": self.method,
            "space": self.space,
            "notes": list(self.notes),
            "interrupted": self.interrupted,
            "command": self.command,
            "trials": [t.to_json() for t in self.trials],
            "best": None if self.best is None else self.best.to_json(),
            "call": self.call,
            "defaults": self.defaults_setting,
            "defaults_rows_per_s": None if d is None else d.rate,
            "limits": None if self.limits is None else self.limits.to_json(),
            "share_of_limit": self.share_of_limit,
            "search_seconds": self.search_seconds,
            "versus_defaults": None if self.versus_defaults is None else self.versus_defaults.to_json(),
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n")
