"""``stoker.tune.tune``: search a store's loader settings with short trials and a simulated step.

The run: the search starts from the loader's defaults as concrete keywords (the worker count the
default loader resolves, threads, prefetch 2; a space without them measures the defaults, no
keyword given, first) and varies one keyword at a time (``search.py``). Then the limits are measured (``limits.py``): one
worker with no step, and a memcpy of the best setting's batch bytes. Ctrl-C during the search
ends it: the result holds the trials so far, the best of them, and ``interrupted=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stoker.errors import ConfigError
from stoker.store.reader import Store
from stoker.tune.limits import Limits, memcpy_rate, step_rate
from stoker.tune.loaders import LoaderPlan, plan_for
from stoker.tune.result import TuneResult
from stoker.tune.search import Trials, coerce, descend, grid
from stoker.tune.space import LOADER_DEFAULTS, Space, custom_space, default_space, usable_cores
from stoker.tune.trial import Trial, run_trial


def tune(
    store: Store | str,
    *,
    batch_size: int = 256,
    step_ms: float = 0.0,
    trial_batches: int = 30,
    trial_seconds: float = 0.5,
    space: Mapping[str, Sequence[Any]] | Sequence[str] | None = None,
    device: str = "cpu",
    method: str = "descent",
    on_trial: Callable[[Trial], None] | None = None,
    make: Callable[[dict[str, Any]], Any] | None = None,
) -> TuneResult:
    """Find the fastest loader setting for ``store`` under a simulated step of ``step_ms`` per batch.

    Args:
        store: a store (or its path); its loader is the one ``stoker bench`` picks (images, text, plain).
        batch_size: rows per batch of every trial.
        step_ms: a pure-Python busy loop holding the GIL this long after each batch (0: none).
        trial_batches: batches timed per trial (after 2 warm-up batches).
        trial_seconds: each trial goes on past ``trial_batches`` until this long has passed.
        space: the keywords to search: names (their default candidates), or names mapped to
            candidate values; None searches workers, engine and prefetch depth (and pin_memory on CUDA).
        device: where batches land.
        method: ``"descent"`` (coordinate descent, few trials) or ``"grid"`` (every setting).
        on_trial: called with each trial as it ends (the CLI prints it).
        make: builds the loader of a setting instead of the store's own (tests, custom loaders).
    """
    if isinstance(trial_batches, bool) or not isinstance(trial_batches, int) or trial_batches < 1:
        raise ConfigError(f"trial_batches must be an integer >= 1, got {trial_batches!r}", option="trial_batches")
    if not isinstance(step_ms, (int, float)) or isinstance(step_ms, bool) or step_ms < 0:
        raise ConfigError(f"step_ms must be a number of milliseconds >= 0, got {step_ms!r}", option="step_ms")
    if not isinstance(trial_seconds, (int, float)) or isinstance(trial_seconds, bool) or trial_seconds < 0:
        raise ConfigError(f"trial_seconds must be a number >= 0, got {trial_seconds!r}", option="trial_seconds")
    if method not in ("descent", "grid"):
        raise ConfigError(f"method must be 'descent' or 'grid', not {method!r}", option="method")
    plan = plan_for(store, batch_size, device=device)
    cores = usable_cores()
    chosen: Space = (
        default_space(plan.kind, device, cores) if space is None else custom_space(plan.kind, space, device, cores)
    )
    build = make or plan.make

    def measure(setting: dict[str, Any]) -> Trial:
        return run_trial(build, setting, batches=trial_batches, step_ms=step_ms, min_seconds=trial_seconds)

    trials = Trials(measure, on_trial)
    interrupted = False
    defaults: dict[str, Any] = {}
    limits = None
    try:
        resolved = {**LOADER_DEFAULTS, **_resolved_defaults(build)}
        if str(device).startswith("cuda"):
            resolved["pin_memory"] = True  # pin_memory=None pins exactly when the device is CUDA
        defaults = {k: resolved[k] for k in chosen.values if k in resolved}
        if coerce(defaults, chosen) != defaults:  # the defaults are not a point of this space: measure them too
            defaults = {}
            trials.rate(defaults)
        if method == "grid":
            grid(chosen, trials)
        else:
            descend(chosen, trials, resolved)
        limits = _limits(build, (trial_batches, trial_seconds), step_ms, batch_size, trials.best(), cores)
    except KeyboardInterrupt:
        interrupted = True
    best = trials.best()
    return TuneResult(
        store=str(plan.store.path),
        kind=plan.kind,
        loader=plan.describe(),
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
        notes=chosen.notes,
        interrupted=interrupted,
    )


def _call(plan: LoaderPlan, make: Any, setting: dict[str, Any]) -> str:
    if make is None:
        return plan.call(setting)
    return ", ".join(f"{k}={v!r}" for k, v in setting.items()) or "(the defaults)"


def _resolved_defaults(build: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """The defaults as concrete keywords: the worker count the default loader chose."""
    try:
        loader = build({})
    except Exception:  # the defaults trial already recorded why; start from the first candidates
        return {}
    try:
        return {"num_workers": int(loader.num_workers)}
    except (AttributeError, TypeError, ValueError):
        return {}
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
