"""Coordinate descent over a :class:`~stoker.tune.space.Space`: few trials, not the grid.

From the start setting, each keyword in turn (the engine first) is varied with the others held. A
numeric one climbs to the faster neighbour and goes on that way while the rate keeps rising; the
worker count (:data:`MODES_AT_ZERO`) also tries 0 when its climb stops short of it, and the prefetch
depth (:data:`DEEPER`) tries its largest value first. A categorical one (engine) tries each value
(from no workers, with the fewest workers). A move must beat the best by ``min_gain`` (3 %) to
count. Passes repeat until one changes nothing (at most ``passes``), or a rate is within ``near``
(5 %) of ``ceiling`` (the step's own bound). Each setting is measured once, told the rate it must
beat (a ``race`` measure may end below it); then the fastest, and the runner-up within ``close``
(10 %) of it, are measured once more, and the best is the fastest by mean. A failed trial counts as
no rate. :func:`grid` measures every setting instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from stoker.tune.space import LOADER_DEFAULTS, Space, normalize
from stoker.tune.trial import Trial

DEEPER = frozenset({"prefetch_factor"})  # keywords whose larger values cost memory, not speed: tried deepest first
# keywords whose lowest value is a mode of its own (no workers: inline reads), not the end of a climb
MODES_AT_ZERO = frozenset({"num_workers"})

Measure = Callable[[dict[str, Any]], Trial]
Race = Callable[[dict[str, Any], float], Trial]  # a measure told the rate to beat (it may end early below it)


class Trials:
    """The trials measured so far, one per setting, in order; the best one."""

    def __init__(
        self, measure: Measure, on_trial: Callable[[Trial], None] | None = None, race: Race | None = None
    ) -> None:
        self._measure = measure
        self._race = race
        self._on_trial = on_trial
        self.done: list[Trial] = []

    def rate(self, setting: dict[str, Any], again: bool = False, beat: float | None = None) -> float:
        """The rate of ``setting`` (measured now unless already, or ``again``): 0 for a failed trial.
        A setting measured more than once has the mean of its rates. ``beat``: the rate it must
        exceed to matter; with ``race``, its trial may end as soon as it is clearly below that."""
        known = None if again else self.mean(setting)
        if known is not None:
            return known
        if beat is not None and self._race is not None and not again:
            trial = self._race(setting, beat)
        else:
            trial = self._measure(setting)
        self.add(trial)
        return self.mean(setting) or 0.0

    def add(self, trial: Trial) -> None:
        """Record a trial measured elsewhere (as if measured here)."""
        self.done.append(trial)
        if self._on_trial is not None:
            self._on_trial(trial)

    def count(self, setting: dict[str, Any]) -> int:
        """How many trials ``setting`` had."""
        return sum(t.setting == setting for t in self.done)

    def mean(self, setting: dict[str, Any]) -> float | None:
        """The mean rate of ``setting``'s trials (a failed one counts 0), None if never measured."""
        rates = [t.rate or 0.0 for t in self.done if t.setting == setting]
        return sum(rates) / len(rates) if rates else None

    def ranked(self) -> list[dict[str, Any]]:
        """The settings that ran without failing, fastest (mean rate) first."""
        settings: list[dict[str, Any]] = []
        for t in self.done:
            if t.ok and t.setting not in settings:
                settings.append(t.setting)
        return sorted(settings, key=lambda s: -(self.mean(s) or 0.0))

    def best(self) -> Trial | None:
        """The fastest setting's last trial, its rate and wait share the means of its trials."""
        ranked = self.ranked()
        if not ranked:
            return None
        mine = [t for t in self.done if t.setting == ranked[0]]
        waits = [t.wait_share for t in mine if t.wait_share is not None]
        wait = sum(waits) / len(waits) if waits else None
        return replace(mine[-1], rate=self.mean(ranked[0]), wait_share=wait)


def coerce(setting: dict[str, Any], space: Space) -> dict[str, Any] | None:
    """``setting`` made valid: with no workers, engine and prefetch at their defaults (None if not in ``space``)."""
    out = dict(setting)
    if out.get("num_workers") == 0:
        for name in ("engine", "prefetch_factor"):
            if name in out:
                out[name] = LOADER_DEFAULTS[name]
    if any(out[k] not in space.values[k] for k in out if k in space.values):
        return None
    return normalize(out)


def start_setting(space: Space, start: dict[str, Any]) -> dict[str, Any]:
    """The first setting: ``start``'s value of each keyword (the nearest candidate), else its first candidate."""
    out: dict[str, Any] = {}
    for name, values in space.values.items():
        want = start.get(name, LOADER_DEFAULTS.get(name, values[0]))
        if want in values:
            out[name] = want
        elif _ordered(values) and isinstance(want, int):
            out[name] = min(values, key=lambda v: abs(v - want))
        else:
            out[name] = values[0]
    fixed = coerce(out, space)
    return fixed if fixed is not None else space.settings()[0]


def _ordered(values: tuple[Any, ...]) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def descend(
    space: Space,
    trials: Trials,
    start: dict[str, Any],
    *,
    min_gain: float = 0.03,
    passes: int = 2,
    ceiling: float | None = None,
    close: float = 0.10,
    near: float = 0.05,
) -> None:
    """Coordinate descent from ``start``; the trials land in ``trials``. It stops early once a rate
    reaches ``ceiling * (1 - near)``. The fastest setting and the runner-up when within ``close`` of
    it are measured once more at the end, and the best is chosen by mean."""
    current = start_setting(space, start)
    best = trials.rate(current)
    enough = None if ceiling is None else ceiling * (1 - near)
    for _ in range(passes):
        if enough is not None and best >= enough:
            break
        moved = False
        for name in sorted(
            space.values, key=lambda n: n != "engine"
        ):  # the engine first: it moves the best worker count
            values = space.values[name]
            if len(values) < 2 or (enough is not None and best >= enough):
                continue
            found, rate = _vary(space, trials, current, name, best, min_gain)
            if found != current:
                current, best, moved = found, rate, True
        if not moved:
            break
    ranked = trials.ranked()[:2]
    top = trials.mean(ranked[0]) if ranked else None
    for setting in ranked:
        if setting is ranked[0] or (top and (trials.mean(setting) or 0.0) >= top * (1 - close)):
            trials.rate(setting, again=True)
    for _ in range(2):  # a setting that leads only by others' second trials gets its own
        lead = trials.ranked()[:1]
        if not lead or trials.count(lead[0]) >= 2:
            break
        trials.rate(lead[0], again=True)


def _vary(
    space: Space, trials: Trials, current: dict[str, Any], name: str, best: float, min_gain: float
) -> tuple[dict[str, Any], float]:
    """The best setting found by varying ``name`` alone from ``current``, and its rate."""
    values = space.values[name]

    def at(value: Any) -> dict[str, Any] | None:
        if name == "prefetch_factor" and current.get("num_workers") == 0:
            return _with_workers(space, current, name, value)  # no prefetch without workers: a joint move
        return coerce({**current, name: value}, space)

    def better(setting: dict[str, Any] | None, than: float) -> float | None:
        if setting is None or setting == current:
            return None
        rate = trials.rate(setting, beat=than * (1 + min_gain))
        return rate if rate > than * (1 + min_gain) else None

    chosen, chosen_rate = current, best
    if not _ordered(values):
        for value in values:
            setting = at(value)
            if name == "engine" and current.get("num_workers") == 0:
                setting = _with_workers(space, current, name, value)  # no engine runs without workers
            rate = better(setting, chosen_rate)
            if rate is not None and setting is not None:
                chosen, chosen_rate = setting, rate
        return chosen, chosen_rate
    ordered = sorted(values)
    i = ordered.index(current[name])
    for step in (+1, -1):  # climb one way while it pays; the other way only if the first did not
        j = i + step
        if step > 0 and name in DEEPER and j < len(ordered) - 1:  # the deepest first: a bracket
            setting = at(ordered[-1])
            rate = better(setting, chosen_rate)
            if rate is not None and setting is not None:
                chosen, chosen_rate = setting, rate
                break
        while 0 <= j < len(ordered):
            setting = at(ordered[j])
            rate = better(setting, chosen_rate)
            if rate is None or setting is None:
                break
            chosen, chosen_rate = setting, rate
            j += step
        if chosen != current:
            break
    if name in MODES_AT_ZERO and ordered[0] == 0 and chosen[name] != 0:  # inline, when the climb stopped short of it
        setting = at(0)
        rate = better(setting, chosen_rate)
        if rate is not None and setting is not None:
            chosen, chosen_rate = setting, rate
    return chosen, chosen_rate


def _with_workers(space: Space, current: dict[str, Any], name: str, value: Any) -> dict[str, Any] | None:
    """``current`` with ``name=value`` and the fewest workers >= 1 the space has (a joint move from 0 workers)."""
    counts = sorted(v for v in space.values.get("num_workers", ()) if v >= 1)
    if not counts:
        return None
    return coerce({**current, name: value, "num_workers": counts[0]}, space)


def grid(space: Space, trials: Trials) -> None:
    """Measure every setting of the space (the exhaustive reference)."""
    for setting in space.settings():
        trials.rate(setting)
