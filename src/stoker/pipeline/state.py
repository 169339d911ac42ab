"""A loader's saved state checked and read: its fields, its version, the position it resumes at."""

from __future__ import annotations

import numbers
from typing import Any

from stoker.errors import StateError
from stoker.pipeline.sampler import BatchSampler, FixedBatches

STATE_VERSION = 2  # 2: positions global (start, world_size); 1: this rank's batches


def resume_point(state: Any, sampler: BatchSampler) -> tuple[int, int]:
    """``(epoch, position)`` at which a loader over ``sampler`` continues from ``state`` (a dict
    saved by ``Loader.state_dict()``, version 1 or 2); a :class:`~stoker.errors.StateError` names
    what is wrong with it otherwise."""
    if isinstance(state, dict) and state.get("version") == 1 and isinstance(state.get("order"), dict):
        state = _from_version_1(state, sampler)
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise StateError(f"not a stoker loader state (version {STATE_VERSION}): {state!r:.200}")
    for key in ("epoch", "start", "world_size", "batches_done", "order"):
        value = state.get(key)
        least = 1 if key == "world_size" else 0
        count = isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= least
        if not (isinstance(value, dict) if key == "order" else count):
            raise StateError(
                f"loader state field {key!r} must be a {'dict' if key == 'order' else f'count >= {least}'}, "
                f"not {value!r:.100}; pass a dict saved by Loader.state_dict()"
            )
    sampler.check_fingerprint(state["order"])
    position = sampler.position(int(state["start"]), int(state["batches_done"]), int(state["world_size"]))
    return int(state["epoch"]), position


def _from_version_1(state: dict[str, Any], sampler: BatchSampler) -> dict[str, Any]:
    """A version-1 state (this rank's batches of the epoch) as version 2; refused where the rank split changed."""
    world = state["order"].get("world_size", 1)
    if isinstance(sampler, FixedBatches) and world != 1:
        raise StateError(
            f"this state was saved by an older stoker on {world} ranks, whose split of the epoch over ranks "
            "differs from this one's: it cannot be resumed exactly; start the epoch again (set_epoch)"
        )
    return {**state, "version": STATE_VERSION, "start": 0, "world_size": world if isinstance(world, int) else 1}


__all__ = ["STATE_VERSION", "resume_point"]
