"""The limits a tuned rate is compared with.

- **cores**: usable cores × the one-worker rate (the rate of ``num_workers=1`` measured with no
  step: one core's worth of loading, spread perfectly over every core);
- **memcpy**: copying each batch's bytes once in memory (a loader that only moves bytes);
- **step**: with a simulated step of ``step_ms`` per batch, the consumer cannot take batches
  faster than one per step.

The limit is the smallest of them; the best trial is reported as a share of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Limits:
    """The bounds, in rows per second (None where unknown)."""

    cores: int
    one_worker: float | None
    memcpy: float | None
    step: float | None

    @property
    def cores_bound(self) -> float | None:
        return None if self.one_worker is None else self.cores * self.one_worker

    @property
    def limit(self) -> float | None:
        """The smallest bound known, or None."""
        known = [b for b in (self.cores_bound, self.memcpy, self.step) if b is not None]
        return min(known) if known else None

    def to_json(self) -> dict[str, Any]:
        return {
            "cores": self.cores,
            "one_worker_rows_per_s": self.one_worker,
            "cores_x_one_worker_rows_per_s": self.cores_bound,
            "memcpy_rows_per_s": self.memcpy,
            "step_rows_per_s": self.step,
            "limit_rows_per_s": self.limit,
        }


def memcpy_rate(batch_bytes: int, batch_rows: int, seconds: float = 0.2) -> float | None:
    """Rows per second when each batch of ``batch_bytes`` bytes is copied once (None without bytes)."""
    if batch_bytes <= 0 or batch_rows <= 0:
        return None
    src = np.ones(batch_bytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # pages touched before timing
    copies = 0
    t0 = time.perf_counter()
    while True:
        np.copyto(dst, src)
        copies += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds and copies >= 3:
            return copies * batch_rows / elapsed


def step_rate(step_ms: float, batch_rows: int) -> float | None:
    """Rows per second of a consumer whose step takes ``step_ms`` per batch (None without a step)."""
    return None if step_ms <= 0 else batch_rows * 1000.0 / step_ms
