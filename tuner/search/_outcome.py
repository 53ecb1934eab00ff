"""How a trial's outcome reaches the sampler, and how long a trial may run. No Ray here: the benchmarks drive
an Optuna sampler exactly as a study does with `tell_trial`.

A trial that ran out of memory, diverged or errored is told to Optuna as COMPLETE with finite penalty values and
a violated constraint (`trial.set_constraint`, Optuna 5). TPE and NSGA-II rank infeasible trials below every
feasible one, so the failing region stops being proposed. Plain FAIL would be ignored by the samplers, and NaN
would leave the trial RUNNING forever.
"""

from __future__ import annotations

import statistics
from typing import Any

from tuner.config import Budget
from tuner.study import Objective

CONSTRAINT = "failed"  # constraint key: 1.0 for a failed trial, 0.0 otherwise
PENALTY = 1e12  # a failed trial's objective values: finite (never NaN), and worse than anything real


def penalty(o: Objective) -> float:
    return -PENALTY if o.maximize else PENALTY


def tell_trial(study: Any, trial: Any, objectives: list[Objective], values: list[float] | None) -> None:
    """Tell Optuna one trial's outcome: its objective values and a satisfied constraint, or (values None: it
    failed) finite penalties and a violated constraint."""
    feasible = values is not None
    trial.set_constraint(CONSTRAINT, 0.0 if feasible else 1.0)
    study.tell(trial, values if feasible else [penalty(o) for o in objectives])


def wall_limit(budget: Budget, train_seconds: list[float]) -> float:
    """Wall-time cap for the next trial's training loop.

    Seconds budget S: 2*S (at least S + 10 s): a config spends S unless single steps are slower than that.
    Samples budget: 5x the median training time of the complete trials so far (at least 30 s); 600 s until two
    trials have completed.
    """
    if budget.seconds is not None:
        return max(2.0 * budget.seconds, budget.seconds + 10.0)
    if len(train_seconds) < 2:
        return 600.0
    return max(30.0, 5.0 * statistics.median(train_seconds))
