"""Time to a target quality, the way MLPerf Training scores it (issue 34): the first evaluation that meets it.

A trial of a study with a target evaluates its quality every K training samples (the same K for every trial) and
keeps its quality curve, one point per evaluation: (samples, training seconds, quality). Its time to target is
the training seconds at the first point that meets the target (evaluation time left out, reported beside it),
its samples to target the samples there. A trial whose budget ends before one does ends `not reached`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.config import Target

NOT_REACHED = "not reached"


@dataclass(frozen=True)
class CurvePoint:
    """One evaluation of a trial's quality: after `samples` training samples and `seconds` of training."""

    samples: int
    seconds: float
    quality: float | None

    def as_list(self) -> list[float | None]:
        return [float(self.samples), self.seconds, self.quality]


def curve_points(curve: list[list[Any]]) -> list[CurvePoint]:
    """A record's quality_curve ([samples, seconds, quality] lists) as points."""
    return [CurvePoint(int(s), float(t), None if q is None else float(q)) for s, t, q in curve]


def first_reached(curve: list[CurvePoint], target: Target) -> CurvePoint | None:
    """The first point of `curve` (in training order) that meets `target`; None: none does. A later point that
    falls back past the target does not undo it, and an earlier lucky one is not skipped: the first one counts."""
    return next((p for p in curve if target.met(p.quality)), None)


def target_metrics(curve: list[CurvePoint], target: Target, eval_seconds: float) -> dict[str, float | int | None]:
    """time_to_target, samples_to_target (None: not reached) and target_eval_seconds (the evaluations' wall time,
    up to the first passing one, or all of them)."""
    hit = first_reached(curve, target)
    return {"time_to_target": hit.seconds if hit is not None else None,
            "samples_to_target": hit.samples if hit is not None else None,
            "target_eval_seconds": eval_seconds}
