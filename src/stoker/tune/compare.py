"""The best setting against the defaults, like with like: warm trials in interleaved rounds.

The search's trials are not a fair comparison: the defaults run first (a cold page cache, a first
loader build), screens end at different lengths, and the best setting's rate is a mean over several
trials. So once the search is done, both settings run again as full trials of the same length, in
``rounds`` rounds that alternate which goes first (A B, B A, A B, ...), after the search warmed the
data. The ratio printed is the median of the per-round ratios, with their range; when the two
settings' ranges of rates overlap, the gain is said to be within noise.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stoker.tune.trial import Trial

ROUNDS = 3  # interleaved rounds of the final comparison


@dataclass(frozen=True)
class Comparison:
    """The best setting's rate over the defaults' in interleaved rounds of equal trials.

    Attributes:
        best_rates, default_rates: rows/s of each round's trial (a failed trial is left out).
        ratios: best over defaults, per round where both ran.
    """

    best_rates: tuple[float, ...]
    default_rates: tuple[float, ...]
    ratios: tuple[float, ...]

    @property
    def ratio(self) -> float | None:
        """The median of the per-round ratios, None when no round gave both."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def within_noise(self) -> bool:
        """Whether the two settings' ranges of rates overlap (no gain beyond this machine's noise)."""
        if not self.best_rates or not self.default_rates:
            return True
        return min(self.best_rates) <= max(self.default_rates) and min(self.default_rates) <= max(self.best_rates)

    def __str__(self) -> str:
        if self.ratio is None:
            return "not compared (a trial failed)"
        spread = f"{min(self.ratios):.2f}-{max(self.ratios):.2f}"
        words = f"{self.ratio:.2f}x (rounds {spread}, {len(self.ratios)} interleaved warm rounds)"
        return words + (": no gain beyond noise" if self.within_noise else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "ratios": list(self.ratios),
            "best_rows_per_s": list(self.best_rates),
            "defaults_rows_per_s": list(self.default_rates),
            "within_noise": self.within_noise,
        }


def compare(
    trial: Callable[[dict[str, Any]], Trial], best: dict[str, Any], defaults: dict[str, Any], rounds: int = ROUNDS
) -> Comparison:
    """Run ``trial`` on ``best`` and ``defaults`` in ``rounds`` rounds, the first to run alternating."""
    best_rates: list[float] = []
    default_rates: list[float] = []
    ratios: list[float] = []
    for r in range(rounds):
        order = (best, defaults) if r % 2 == 0 else (defaults, best)
        rates = {id(setting): trial(setting).rate for setting in order}
        b, d = rates[id(best)], rates[id(defaults)]
        if b is not None:
            best_rates.append(b)
        if d is not None:
            default_rates.append(d)
        if b is not None and d:
            ratios.append(b / d)
    return Comparison(tuple(best_rates), tuple(default_rates), tuple(ratios))


__all__ = ["Comparison", "ROUNDS", "compare"]
