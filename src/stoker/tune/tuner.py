"""``stoker.tune.tune``: search a store's loader settings with short trials and a simulated step.

The run: the search starts from the loader's defaults as concrete keywords (the worker count the
default loader resolves, threads, prefetch 2; a space without them measures the defaults, no
keyword given, first) and varies one keyword at a time (``search.py``). Then the limits are measured (``limits.py``): one
worker with no step, and a memcpy of the best setting's batch bytes. Ctrl-C during the search
ends it: the result holds the trials so far, the best of them, and ``interrupted=True``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from stoker.errors import ConfigError
from stoker.pipeline.schedule import Schedule, usable_cores
from stoker.store.reader import Store
from stoker.tune.compare import Comparison, compare
from stoker.tune.limits import Limits, memcpy_rate, step_rate
from stoker.tune.loaders import LoaderPlan, plan_for
from stoker.tune.result import TuneResult
from stoker.tune.search import Trials, coerce, descend, grid
from stoker.tune.space import IMAGE_ONLY, LOADER_DEFAULTS, Space, custom_space, default_space
from stoker.tune.trial import Ending, Trial, run_trial

NEAR = 0.05  # the search stops within this share of the step's bound


def tune(
    store: Store | str | None,
    *,
    batch_size: int = 256,
    step_ms: float = 0.0,
    trial_batches: int = 30,
    trial_seconds: float = 0.5,
    stable: float | None = 0.10,
    space: Mapping[str, Sequence[Any]] | Sequence[str] | None = None,
    device: str = "cpu",
    method: str = "descent",
    on_trial: Callable[[Trial], None] | None = None,
    make: Callable[[dict[str, Any]], Any] | None = None,
    kind: str | None = None,
) -> TuneResult:
    """Find the fastest loader setting for ``store`` under a simulated step of ``step_ms`` per batch.

    Args:
        store: a store (or its path); its loader is the one its data is trained with (images,
            text, plain). None with ``make``: the loader ``make`` builds (on-the-fly text, a Dataset).
        batch_size: rows per batch of every trial.
        step_ms: a pure-Python busy loop holding the GIL this long after each batch (0: none).
        trial_batches: batches timed per trial (after 2 warm-up batches).
        trial_seconds: a full trial goes on past ``trial_batches`` until this long has passed (the
            grid's trials; the search's trials are shorter, see ``stable``).
        stable: the search's first trial of each setting ends once its rate is known within this
            (the half-width of its 90 % confidence interval, from batch means, as a share of it),
            after ``trial_batches`` and a quarter of ``trial_seconds``, and at ``trial_seconds`` at
            the latest; a candidate ends as soon as it is clearly below the rate it must beat;
            None: every trial is full.
        space: the keywords to search: names (their default candidates), or names mapped to
            candidate values; None searches workers, engine and prefetch depth (and pin_memory on CUDA).
        device: where batches land.
        method: ``"descent"`` (coordinate descent, few trials) or ``"grid"`` (every setting).
        on_trial: called with each trial as it ends (the CLI prints it).
        make: builds the loader of a setting instead of the store's own (tests, custom loaders).
        kind: ``plain``, ``images`` or ``text``: the settings that apply; default the store's kind
            (``plain`` without a store).
    """
    if isinstance(trial_batches, bool) or not isinstance(trial_batches, int) or trial_batches < 1:
        raise ConfigError(f"trial_batches must be an integer >= 1, got {trial_batches!r}", option="trial_batches")
    if not isinstance(step_ms, (int, float)) or isinstance(step_ms, bool) or step_ms < 0:
        raise ConfigError(f"step_ms must be a number of milliseconds >= 0, got {step_ms!r}", option="step_ms")
    if not isinstance(trial_seconds, (int, float)) or isinstance(trial_seconds, bool) or trial_seconds < 0:
        raise ConfigError(f"trial_seconds must be a number >= 0, got {trial_seconds!r}", option="trial_seconds")
    if stable is not None and (not isinstance(stable, (int, float)) or isinstance(stable, bool) or stable <= 0):
        raise ConfigError(f"stable must be a fraction > 0 or None, got {stable!r}", option="stable")
    if method not in ("descent", "grid"):
        raise ConfigError(f"method must be 'descent' or 'grid', not {method!r}", option="method")
    if store is None and make is None:
        raise ConfigError(
            "give a store to tune, or make= (a function building the loader of a setting)", option="store"
        )
    plan = None if store is None else plan_for(store, batch_size, device=device, kind=kind)
    what = kind or (plan.kind if plan is not None else "plain")
    cores = usable_cores()
    chosen: Space = default_space(what, device, cores) if space is None else custom_space(what, space, device, cores)
    build = make or plan.make  # type: ignore[union-attr]  # one of them is given (checked above)

    def full(setting: dict[str, Any]) -> Trial:
        return run_trial(build, setting, batches=trial_batches, step_ms=step_ms, min_seconds=trial_seconds)

    def screen(setting: dict[str, Any], beat: float | None = None) -> Trial:
        if stable is None or method == "grid":
            return full(setting)
        return run_trial(
            build,
            setting,
            batches=trial_batches,
            step_ms=step_ms,
            min_seconds=trial_seconds / 4,
            stable=stable,
            max_seconds=trial_seconds,
            beat=beat,
        )

    # the confirming trials are screens too (full ones cost the grid's time); a candidate clearly
    # below the rate it must beat ends early (``beat``)
    trials = Trials(screen, on_trial, race=screen)
    interrupted = False
    defaults: dict[str, Any] = {}
    limits = None
    versus: Comparison | None = None
    t_search = time.perf_counter()
    searched = None
    try:
        resolved = {**LOADER_DEFAULTS, **_schedule_keywords(build)}
        defaults = {k: resolved[k] for k in chosen.values if k in resolved}
        if coerce(defaults, chosen) != defaults:  # the defaults are not a point of this space: measure them too
            defaults = {}
            trials.rate(defaults)
        if method == "grid":
            grid(chosen, trials)
        else:
            descend(chosen, trials, resolved, ceiling=step_rate(step_ms, batch_size), near=NEAR)
        searched = time.perf_counter() - t_search
        versus = _versus(trials, defaults, full)
        limits = _limits(build, (trial_batches, trial_seconds), step_ms, batch_size, trials.best(), cores)
    except KeyboardInterrupt:
        interrupted = True
    if searched is None:
        searched = time.perf_counter() - t_search
    best = trials.best()
    bound = step_rate(step_ms, batch_size)
    stopped: tuple[str, ...] = ()
    if method != "grid" and bound and best is not None and (best.rate or 0.0) >= bound * (1 - NEAR):
        stopped = (
            f"the search stopped at {best.rate:,.0f} rows/s, within {NEAR:.0%} of the step's own bound "
            f"({bound:,.0f} rows/s: {batch_size} rows per {step_ms:g} ms step): no loader setting can beat the step",
        )
    return TuneResult(
        store="-" if plan is None else str(plan.store.path),
        kind=what,
        loader="the loader make= builds" if plan is None else plan.describe(),
        batch_size=batch_size,
        step_ms=float(step_ms),
        trial_batches=trial_batches,
        method="grid" if method == "grid" else "coordinate descent",
        trials=trials.done,
        defaults_setting=defaults,
        best=best,
        call=None if best is None else _call(plan, make, best.setting),
        limits=limits,
        space={k: list(v) for k, v in chosen.values.items()},
        notes=(*chosen.notes, *stopped),
        interrupted=interrupted,
        search_seconds=searched,
        versus_defaults=versus,
    )


def _versus(trials: Trials, defaults: dict[str, Any], trial: Callable[[dict[str, Any]], Trial]) -> Comparison | None:
    """The best setting against the defaults in interleaved warm rounds (``compare.py``); None when
    the defaults are the best, or did not run."""
    best = trials.best()
    ran = any(t.setting == defaults and t.ok for t in trials.done)
    if best is None or best.setting == defaults or not ran:
        return None
    return compare(trial, best.setting, defaults)


def _call(plan: LoaderPlan | None, make: Any, setting: dict[str, Any]) -> str:
    if make is None and plan is not None:
        return plan.call(setting)
    return ", ".join(f"{k}={v!r}" for k, v in setting.items()) or "(the defaults)"


def _schedule_keywords(build: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """The default loader's schedule (``loader.schedule``, ``pipeline/schedule.py``) as loader keywords:
    the engine and workers its defaults chose for this source (a torch Dataset's are processes), its
    prefetch depth, chunk size and pinning; for images, its source's decode options as resolved (a
    training crop decodes reduced). The search starts there."""
    try:
        loader = build({})
    except Exception:  # the defaults trial already recorded why; start from the first candidates
        return {}
    try:
        schedule = getattr(loader, "schedule", None)
        if not isinstance(schedule, Schedule):
            return {}
        keywords = schedule.keywords()
        options = getattr(getattr(loader, "source", None), "options", None)  # an ImageSource's, resolved
        keywords.update({k: getattr(options, k) for k in IMAGE_ONLY if hasattr(options, k)})
        return keywords
    finally:
        close = getattr(loader, "close", None)
        if close is not None:
            close()


def _limits(
    build: Callable[[dict[str, Any]], Any],
    length: tuple[int, float],
    step_ms: float,
    batch_size: int,
    best: Trial | None,
    cores: int,
) -> Limits:
    """cores × one worker's rate (no step), memcpy of the best setting's batch bytes, the step's bound."""
    one = run_trial(build, {"num_workers": 1}, batches=length[0], step_ms=0.0, min_seconds=length[1])
    size = best.batch_bytes if best is not None else one.batch_bytes
    return Limits(
        cores=cores,
        one_worker=one.rate,
        memcpy=memcpy_rate(size, batch_size),
        step=step_rate(step_ms, batch_size),
    )


def tune_script(
    command: Sequence[str],
    *,
    trial_batches: int = 30,
    trial_seconds: float = 5.0,
    stable: float | None = 0.10,
    timeout: float = 300.0,
    space: Mapping[str, Sequence[Any]] | Sequence[str] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> TuneResult:
    """Find the fastest setting of the stoker loaders a training script builds, by running it.

    Each trial runs ``command`` (``["python", "train.py", ...]``) with the setting's keywords put
    into every ``stoker.Loader`` (and ``stoker.text.Loader``) it builds, times ``trial_batches``
    of its own steps on its first busy loader, and ends it (``script.py``, ``inject.py``). The
    first trial runs the script as written: its loader's settings are the search's start. When
    the script hardly waits for data (its wait share says how much any setting could gain), the
    search stops there.

    Args:
        command: the command that runs the script.
        trial_batches: the script's steps timed per trial (after 5 warm-up steps).
        trial_seconds: a trial's longest run in seconds; trials end sooner once stable (``stable``).
        stable: see :func:`tune`.
        timeout: seconds a trial's script may run in all (start-up included) before it is ended.
        space: the keywords to search (see :func:`tune`); default workers, engine, prefetch depth.
        on_trial: called with each trial as it ends.
    """
    from stoker.tune.script import ScriptRun, ScriptTrials, run_script

    if isinstance(trial_batches, bool) or not isinstance(trial_batches, int) or trial_batches < 3:
        raise ConfigError(f"trial_batches must be an integer >= 3, got {trial_batches!r}", option="trial_batches")
    if not isinstance(trial_seconds, (int, float)) or isinstance(trial_seconds, bool) or trial_seconds < 0:
        raise ConfigError(f"trial_seconds must be a number >= 0, got {trial_seconds!r}", option="trial_seconds")
    minimum, cap = (trial_seconds / 4, trial_seconds) if stable else (trial_seconds, None)
    screening = ScriptTrials(tuple(command), Ending(trial_batches, 5, minimum, stable, cap), timeout)
    cores = usable_cores()
    chosen = default_space("plain", "cpu", cores) if space is None else custom_space("plain", space, "cpu", cores)
    runs: list[ScriptRun] = []

    def measure(setting: dict[str, Any], how: ScriptTrials) -> Trial:
        run = run_script(how, setting)
        runs.append(run)
        return run.trial

    trials = Trials(lambda s: measure(s, screening), on_trial)
    interrupted = False
    defaults: dict[str, Any] = {}
    versus: Comparison | None = None
    notes: list[str] = []
    try:
        first = run_script(screening, {})  # the script as written
        runs.append(first)
        own = {k: first.loader[k] for k in chosen.values if first.loader and k in first.loader}
        if own and coerce(own, chosen) == own:  # its settings are a point of the space: the search's start
            defaults = own
        trials.add(replace(first.trial, setting=defaults))
        if first.loader:
            notes.append(_script_note(first))
        if first.trial.ok:
            wait = first.trial.wait_share or 0.0
            ceiling = (first.trial.rate or 0.0) / max(1.0 - wait, 1e-6)  # no wait at all: the step's own rate
            if wait < NEAR:
                notes.append(
                    f"the script waits for data {wait:.0%} of its loop as written: no loader setting can make it "
                    f"faster by more than that, so the search stopped there"
                )
            descend(chosen, trials, {**LOADER_DEFAULTS, **own}, ceiling=ceiling, near=NEAR)
            versus = _versus(trials, defaults, lambda s: measure(s, screening))
    except KeyboardInterrupt:
        interrupted = True
    best = trials.best()
    name = str((runs[0].loader or {}).get("name", "stoker.Loader") if runs else "stoker.Loader")
    call = None
    if best is not None:  # the keywords to give the script's loader (a stoker.Loader or stoker.text.Loader call)
        keywords = ", ".join(f"{k}={v!r}" for k, v in best.setting.items())
        call = f"{keywords}  # in the script's {name}" if keywords else f"keep the script's own settings ({name})"
    return TuneResult(
        store="-",
        kind="script",
        loader=f"the script's {name}",
        batch_size=int((runs[0].loader or {}).get("batch_size") or 0) if runs else 0,
        step_ms=0.0,
        trial_batches=trial_batches,
        method="coordinate descent",
        trials=trials.done,
        defaults_setting=defaults,
        best=best,
        call=call,
        limits=None,
        space={k: list(v) for k, v in chosen.values.items()},
        notes=(*chosen.notes, *notes),
        interrupted=interrupted,
        command=list(command),
        versus_defaults=versus,
    )


def _script_note(first: Any) -> str:
    """What the trials put into the script's loaders, and what the script gives them itself."""
    given = first.given[0] if first.given else {}
    own = ", ".join(f"{k}={v!r}" for k, v in given.items()) or "none of them"
    built = ", ".join(f"{k}={first.loader[k]!r}" for k in ("num_workers", "engine", "prefetch_factor"))
    return (
        "each trial puts its setting into every stoker loader the script builds, replacing the script's own "
        f"keywords (it gives {own}; as built: {built}); the rate is the script's own loop, its step and its "
        "wait for data together"
    )
