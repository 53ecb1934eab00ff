"""Where a timed window also ends for an evaluation (tuner.train.loop): a rung's points, budgets in the budget's
unit from the loop's start, and a target's sample points, training samples of all ranks every K (tuner.target).
A window reaching one ends there once it holds its minimum steps and seconds, so the evaluation that follows,
out of the loop's clock (tuner.train._rungs), reads the model at its point. Not under DDP, whose windows hold
step counts agreed at their start: there a rung follows at the next window's end."""

from __future__ import annotations

import math
from collections.abc import Callable


class EvalPoints:
    """The loop's evaluation points, read live: `rungs` a list or a callable asked again at each check (rung points
    that move with the reserve, tuner.train.trial), `samples` the sample points not yet served (None: no target).
    `used()` is the budget used so far in its unit (a clock read for a seconds budget), `trained()` this rank's
    training samples so far; `world` the ranks (more than one: the pace is shared and no window is cut here)."""

    def __init__(self, rungs: list[float] | Callable[[], list[float]] | None,
                 samples: Callable[[], list[int]] | None, *, world: int, used: Callable[[], float],
                 trained: Callable[[], int]) -> None:
        self._rungs, self._samples = rungs, samples
        self.world, self.shared = world, world > 1
        self._used, self._trained = used, trained
        self.any = bool(self.rung_budgets()) or samples is not None  # any point at all, as the loop starts

    def rung_budgets(self) -> list[float]:
        return sorted(float(b) for b in (self._rungs() if callable(self._rungs) else self._rungs or ()))

    def samples_ahead(self) -> list[int]:
        """The sample points still to come (none under DDP)."""
        return list(self._samples() if self._samples is not None and not self.shared else ())

    def crossed(self, since: float) -> bool:
        """A rung point was crossed since `since` (the budget used when this window started), or a sample point
        is due (checked once the window's minimums are met)."""
        return self.any and not self.shared and (any(since < b <= self._used() for b in self.rung_budgets())
                                                 or self.sample_due())

    def sample_due(self) -> bool:
        """A sample point was reached (the caller lists only those not yet served: one warm-up passed is due)."""
        ks = self._samples() if self._samples is not None else ()
        return any(k <= self._trained() * self.world for k in ks)

    def steps_to_sample(self, step_n: int) -> int:
        """Steps until the next sample point at `step_n` samples a step, warm-up's (1 when one is due; a large
        number when there is none)."""
        ahead = self.samples_ahead()
        if not ahead or step_n <= 0:
            return 1 << 30
        return max(1, math.ceil((min(ahead) - self._trained() * self.world) / (step_n * self.world)))

    def rungs_left(self, since: float, now: float) -> list[float]:
        """How far the rung points past `since` are from `now`, in the budget's unit."""
        return [b - now for b in self.rung_budgets() if b > since]
