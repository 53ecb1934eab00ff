"""Time to a target quality, the way MLPerf Training scores it (issue 34): the first evaluation that meets it.

A trial of a study with a target evaluates its quality every K training samples (the same K for every trial) and
keeps its quality curve, one point per evaluation: (samples, training seconds, quality). Its time to target is
the training seconds at the first point that meets the target (evaluation time left out, reported beside it),
its samples to target the samples there. A trial whose budget ends before one does ends `not reached`.

A study given no target value but `baseline` derives it (derive_target): the baseline (the workload's own settings)
trains a reference budget, a third of the trials' (reference_budget), with the same evaluations, and the target is
the quality it ends at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuner.config import Budget, Target

NOT_REACHED = "not reached"
SMOOTH_EVALS = 3  # a derived target is the mean of the baseline's last this many evaluations
CAP_FACTOR = 3.0  # a trial not at the target by this many times the baseline's time to target ends `not reached`


EVAL_SHARE = 0.2  # a study's default K keeps each evaluation within this share of training's time ...
EVALS_PER_REFERENCE = 20  # ... and is no finer than this many evaluations over the reference run


def default_eval_every(effective_batch: int, budget: Budget, samples_per_s: float | None,
                       score_s: float | None) -> int:
    """The samples between a target study's evaluations (K) when none is given, from the pre-flight's measured
    pace (the baseline's samples/s) and scoring time, in whole optimizer steps of the baseline: the finest K whose
    evaluation costs at most EVAL_SHARE of the training between two (K >= score_s x samples/s / EVAL_SHARE), and no
    finer than EVALS_PER_REFERENCE evaluations over the reference run (reference_budget). benchmarks/ttt_choices.py
    measured the trade: a fixed 25 steps cost 12-13% on the built-in CNN and GAN, 0.5% on charlm, and left 2-6
    evaluations before the target in short studies. Without a measured pace: EVAL_EVERY_STEPS steps."""
    import math

    from tuner.config import EVAL_EVERY_STEPS

    if not samples_per_s or samples_per_s <= 0 or score_s is None:
        return effective_batch * EVAL_EVERY_STEPS
    ref = reference_budget(budget)
    reference = ref.samples if ref.samples is not None else (ref.seconds or 0.0) * samples_per_s
    k = max(score_s * samples_per_s / EVAL_SHARE, reference / EVALS_PER_REFERENCE)
    return effective_batch * max(1, math.ceil(k / effective_batch - 1e-9))


def reference_budget(budget: Budget) -> Budget:
    """What the baseline trains to derive a target: 1/CAP_FACTOR of the trials' budget B. Trained the whole of B,
    the baseline set a target it met only at the end of B (trial 0, the same settings, missed it on a busy machine:
    0 of 5 trials of a CNN study at B = 8 s reached it), and its cap (3x that time, about 3B) never applied. At
    B/3 the cap is about B and a trial's budget gives the baseline's settings 3x the time they needed."""
    if budget.seconds is not None:
        return Budget(seconds=budget.seconds / CAP_FACTOR)
    assert budget.samples is not None
    return Budget(samples=max(1, round(budget.samples / CAP_FACTOR)))


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
    estimated_time_to_target: samples_to_target / `throughput` (the median samples/s of the trial's timed
    windows). A median window moves less with a shared machine's load than the wall clock from the start to one
    evaluation does, so the estimate compares configs read at different moments more fairly (None: not reached,
    or no throughput measured)."""
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


def derive_target(curve: list[CurvePoint], pending: Target) -> Target | None:
    """The target a baseline's quality curve sets: the mean of its last SMOOTH_EVALS evaluations with a reading,
    in `pending`'s metric, direction and K (None: the baseline read no quality).

    Smoothed because a single evaluation is noisy (a GAN's FID moved 30% between seeds of one config): the last
    reading alone would let one lucky (or unlucky) evaluation set how hard the study's target is. The mean, not
    the best of them, so the target is the quality the baseline settles at, not its luckiest moment; and since one
    of the readings averaged is at least as good as their mean, the baseline itself meets the target within the
    budget it trained (reference_budget), so its time to target, the figure every trial is compared with, always
    exists."""
    last = [p for p in curve if p.quality is not None and math.isfinite(p.quality)][-SMOOTH_EVALS:]
    if not last:
        return None
    value = sum(p.quality for p in last) / len(last)  # type: ignore[misc]
    derived = pending.model_copy(update={"value": value, "source": "baseline",
                                         "evaluations": [p.as_list() for p in last]})
    hit = first_reached(curve, derived)
    if hit is not None and hit.seconds > 0:
        derived = derived.model_copy(update={"cap_seconds": CAP_FACTOR * hit.seconds})
    return derived


def past_cap(point: CurvePoint, target: Target) -> bool:
    """A trial whose evaluation at `point` did not meet `target` stops there as `not reached` when it has trained
    the target's cap (CAP_FACTOR x the baseline's time to target) or longer; without a cap its budget ends it."""
    return target.cap_seconds is not None and point.seconds >= target.cap_seconds and not target.met(point.quality)
