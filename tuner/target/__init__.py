"""Time to target, the study's answer to "fast without training worse" (issues 34 and 51): the seconds (and samples)
a config trains before its quality meets a target, read from the quality curve a trial keeps.

Its one home. `_curve.py`: the curve (one point per evaluation every K samples), where it crosses the target and
the figures a trial records from it (target_metrics), one evaluation step (the resolution), the cap that ends a
trial `not reached`. `_baseline.py`: a target set from the baseline (the reference budget, a third of the trials',
the mean of each seed's last evaluations, the median over its seeds) and the default K. `_plan.py`: a study's
target as planned and checked before the first trial, on --resume, and derived from the baseline's reference run.

It stands above tuner.study (a record's curve and confirmed figures are study's types) and below the producers
(tuner.train evaluates and stops on it), so three pieces live elsewhere, each thin:
- the spec, `Target`, is tuner.config's: a trial's config carries it (with its `Budget`), and config is below
  this package. It is listed here too, so a caller names the concept in one place;
- the baseline's reference run (tuner.search._reference) trains, through tuner.train and Ray: it is handed to
  derive_study_target as `run`;
- the judgement of a time to target against the baseline's (tuner.analysis.reach.versus_baseline) weighs it
  by the noise tuner.analysis measures, and the judge stands above the producers that read the curve from here.
"""

from tuner.config import Target
from tuner.target._baseline import (
    CAP_FACTOR, EVAL_SHARE, EVALS_PER_REFERENCE, SMOOTH_EVALS, TARGET_SEEDS, default_eval_every, derive_seeds_target,
    derive_target, flat_reference, reference_budget, seed_spread,
)
from tuner.target._curve import (
    NOT_REACHED, CurvePoint, crossing, curve_points, eval_step, first_reached, past_cap, record_step, target_metrics,
)
from tuner.target._plan import (
    BASELINE, MAX_EVAL_SHARE, MIN_TARGET_EVALS, TARGET_OBJECTIVES, TargetAsk, check_resumed_target,
    check_target_evaluations, check_target_objectives, derive_study_target, derived_how, plan_target, study_target,
)

__all__ = [
    "BASELINE", "CAP_FACTOR", "EVAL_SHARE", "EVALS_PER_REFERENCE", "MAX_EVAL_SHARE", "MIN_TARGET_EVALS", "NOT_REACHED",
    "SMOOTH_EVALS", "TARGET_OBJECTIVES", "TARGET_SEEDS", "CurvePoint", "Target", "TargetAsk", "check_resumed_target",
    "check_target_evaluations", "check_target_objectives", "crossing", "curve_points", "default_eval_every",
    "derive_seeds_target", "derive_study_target", "derive_target", "derived_how", "eval_step", "first_reached",
    "flat_reference", "past_cap", "plan_target", "record_step", "reference_budget", "seed_spread", "study_target",
    "target_metrics",
]
