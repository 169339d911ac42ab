"""Where a loader stands in its epochs (:class:`Position`), and its saved state checked and read:
its fields, its version, the position it resumes at."""

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


class Position:
    """A loader's place in its epochs: which epoch the next pass reads, and from where.

    ``begin`` is the epoch's position (in the batch sampler's units) where the current count of
    batches began and ``done`` the batches delivered since. Each pass takes a new epoch, even after
    a pass left early, except the one pass after :meth:`load`, which continues at the saved position.
    """

    def __init__(self) -> None:
        self.epoch = 0
        self.begin = 0
        self.done = 0
        self.resume = False  # the next pass continues at begin (set by load)
        self.started = False  # a pass of the current epoch has begun (the next pass takes the next epoch)

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass the whole of ``epoch``."""
        self.epoch, self.begin, self.done, self.resume, self.started = int(epoch), 0, 0, False, False

    def state(self, sampler: BatchSampler) -> dict[str, Any]:
        """The saved state (see ``Loader.state_dict``): small, JSON-able, the same shape on every rank."""
        return {
            "version": STATE_VERSION,
            "epoch": self.epoch,
            "start": self.begin,
            "world_size": int(getattr(sampler, "world_size", 1)),
            "batches_done": self.done,
            "order": sampler.fingerprint(),
        }

    def load(self, state: Any, sampler: BatchSampler) -> None:
        """Continue from ``state`` at the next pass (checked by :func:`resume_point`)."""
        self.epoch, position = resume_point(state, sampler)
        self.begin, self.done, self.resume = position, 0, True

    def begin_pass(self, sampler: BatchSampler) -> tuple[int, int]:
        """Start a pass: ``(epoch, batches left in it)``, the epoch advanced where the last pass took one."""
        if self.resume and sampler.batches_left(self.begin) > 0:
            pass  # the pass after load continues at the saved position
        elif self.resume or self.started:
            self.epoch, self.begin = self.epoch + 1, 0
        else:
            self.begin = 0
        self.done, self.resume, self.started = 0, False, True
        return self.epoch, sampler.batches_left(self.begin)

    def end_pass(self, epoch: int, left: int) -> None:
        """After a pass of ``epoch`` that had ``left`` batches to deliver: a whole one moves on to the next epoch."""
        if self.done >= left:
            self.epoch, self.begin, self.done, self.started = epoch + 1, 0, 0, False


__all__ = ["STATE_VERSION", "Position", "resume_point"]
