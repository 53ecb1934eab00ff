"""A trial's quality curve and its time to target, the way MLPerf Training scores it (issue 34): the first evaluation
that meets it, read at the crossing between the two evaluations around it (issue 51).

A trial of a study with a target evaluates its quality every K training samples (the same K for every trial) and
keeps its quality curve, one point per evaluation: (samples, training seconds, quality). Its time to target is
the training seconds where the curve crosses the target (evaluation time left out, reported beside it), its
samples to target the samples there. A trial whose budget (or the target's cap) ends before one meets it ends
`not reached`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuner.config import Target
from tuner.study import ConfirmedFigure, TrialRecord

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


def crossing(curve: list[CurvePoint], target: Target) -> CurvePoint | None:
    """Where the curve crosses the target (issue 51: a stated resolution): read between the evaluation before the
    first one that meets it and that one, linearly in quality, so a config that meets it just after an evaluation
    is not rounded up a whole evaluation step and one that meets it just before is not rounded down. The first
    evaluation, or one after a missing reading, has no bracket and reads as it is (an upper bound). None: not
    reached."""
    hit = first_reached(curve, target)
    if hit is None:
        return None
    i = curve.index(hit)
    before = curve[i - 1] if i > 0 else None
    if before is None or before.quality is None or not math.isfinite(before.quality) or hit.quality is None \
            or target.value is None or before.quality == hit.quality:
        return hit
    frac = min(1.0, max(0.0, (before.quality - target.value) / (before.quality - hit.quality)))
    return CurvePoint(round(before.samples + frac * (hit.samples - before.samples)),
                      before.seconds + frac * (hit.seconds - before.seconds), hit.quality)


def target_metrics(curve: list[CurvePoint], target: Target, eval_seconds: float,
                   throughput: float | None = None) -> dict[str, float | int | None]:
    """time_to_target, samples_to_target (None: not reached; read at the crossing between the two evaluations
    around it), target_eval_seconds (the evaluations' wall time, up to the first passing one, or all of them) and
    estimated_time_to_target: samples_to_target / `throughput` (the samples/s of the trial's timed windows). The
    windows leave out the evaluations and the pauses that the wall clock from the start to one evaluation holds,
    so the estimate compares configs read at different moments more fairly (None: not reached, or no throughput
    measured)."""
    hit = crossing(curve, target)
    speed = throughput if throughput is not None and math.isfinite(throughput) and throughput > 0 else None
    return {"time_to_target": hit.seconds if hit is not None else None,
            "samples_to_target": hit.samples if hit is not None else None,
            "target_eval_seconds": eval_seconds,
            "estimated_time_to_target": hit.samples / speed if hit is not None and speed is not None else None}


def eval_step(curves: list[list[list[Any]]], key: str) -> float | None:
    """One evaluation step of these runs' quality curves: the median training seconds (key time_to_target) or
    samples (samples_to_target) between two evaluations; the resolution a time to target is read at (None: no
    two evaluations)."""
    import statistics

    col = 0 if key == "samples_to_target" else 1
    gaps = [float(b[col]) - float(a[col]) for c in curves for a, b in zip(c, c[1:])
            if a[col] is not None and b[col] is not None and float(b[col]) > float(a[col])]
    return statistics.median(gaps) if gaps else None


def record_step(record: TrialRecord, figure: ConfirmedFigure | None, key: str) -> float | None:
    """One evaluation step of this config's runs, the resolution its time (or samples) to target is read at: the
    confirmed figure's, else the trial's own curve's (eval_step)."""
    if figure is not None and figure.step is not None:
        return figure.step
    return eval_step([record.quality_curve], key)


def past_cap(point: CurvePoint, target: Target) -> bool:
    """A trial whose evaluation at `point` did not meet `target` stops there as `not reached` when it has trained
    the target's cap (CAP_FACTOR x the baseline's time to target) or longer; without a cap its budget ends it."""
    return target.cap_seconds is not None and point.seconds >= target.cap_seconds and not target.met(point.quality)
