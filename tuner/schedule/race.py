"""`--scheduler race` (issue 34): a study with a target races its trials to it.

A trial stops as soon as it reaches the target (the trial itself stops at its first evaluation that meets it:
tuner.train keeps that) or once its training time passes the best time to target seen so far (a finished trial's
time_to_target) by `margin`. A trial stopped by the race ends `not reached`, its reason naming the race. No rung
ranking is needed, and a trial that would have won is never stopped: it reaches the target before the best so far,
so before best x margin.

Why a margin, and why 1.5 by default: one reading of time to target is noisy. On a shared machine the same config's
wall-clock time moves with the load, and across seeds its samples to target moves too (issue 34 measured quality
spreads of about 30% between seeds on the GAN); a trial 1.3x slower than the best once may be a tie when re-run.
So the race only stops what is slower than that noise could explain; a larger margin stops fewer trials and saves
less. The margin is recorded in the study's plan (study.json's `scheduler`), so --resume races the same way.
"""

from __future__ import annotations

import math

from tuner.errors import ConfigError
from tuner.schedule._base import (CONTINUE, Decision, PlanRequest, Progress, Scheduler, SchedulerOption,
                                  SchedulerPlan)
from tuner.study import Objective, StudyFolder
from tuner.target import NOT_REACHED

DEFAULT_MARGIN = 1.5


class Race(Scheduler):
    """Stops a trial whose training time passes `margin` x the best time to target of the trials finished so far."""

    help = ("with a target: a trial stops once its training time passes the best time to target so far x "
            "--race-margin (1.5)")
    options = (SchedulerOption("margin", "--race-margin", "With --scheduler race: a trial stops once its training time "
                               "passes this many times the best time to target so far (> 1; default 1.5). Recorded "
                               "in study.json.", "the margin", metavar="X"),)

    def __init__(self, margin: float = DEFAULT_MARGIN, best: float | None = None) -> None:
        if not margin >= 1:
            raise ValueError(f"the race's margin must be >= 1 (got {margin})")
        self.margin = float(margin)
        self.best = best  # the best time to target of a finished trial so far (training seconds); None: none yet

    @property
    def limit(self) -> float | None:
        """The training seconds past which a trial that has not reached the target stops."""
        return None if self.best is None else self.best * self.margin

    def decide(self, progress: Progress) -> Decision:
        if progress.final:  # a finished trial: its time to target moves the line (not reached: no time)
            ttt = progress.time_to_target
            if ttt is not None and math.isfinite(ttt) and (self.best is None or ttt < self.best):
                self.best = float(ttt)
            return CONTINUE
        if progress.time_to_target is not None:  # reached: the trial ends itself at that evaluation
            return CONTINUE
        limit, used = self.limit, progress.train_seconds
        if limit is None or used is None or not used > limit:
            return CONTINUE
        return Decision("stop", ends_as=NOT_REACHED,
                        reason=f"stopped by the race: {used:.3g} s of training without reaching the target, past "
                               f"{self.margin:g} x the best time to target so far ({self.best:.3g} s)")

    @classmethod
    def plan(cls, name: str, ask: PlanRequest) -> SchedulerPlan:
        if not ask.target:
            raise ConfigError("--scheduler race races trials to a target: give --target VALUE (or target: in the "
                              "space), or use another --scheduler")
        margin = DEFAULT_MARGIN if ask.margin is None else float(ask.margin)
        if not margin > 1:  # at 1 a trial as fast as the best, read on a busier moment, would be stopped
            raise ConfigError(f"--race-margin must be > 1 (got {margin:g}): a trial stops once its training time "
                              f"passes margin x the best time to target so far (default {DEFAULT_MARGIN:g})")
        return SchedulerPlan.of(name, margin=margin)

    @classmethod
    def build(cls, plan: SchedulerPlan, objectives: list[Objective], folder: StudyFolder | None) -> "Race":
        """The best time to target of the trials the folder recorded (--resume races on from it)."""
        times = [t for t in (recorded_times(folder) if folder is not None else []) if math.isfinite(t)]
        return cls(plan.margin or DEFAULT_MARGIN, best=min(times) if times else None)

    @classmethod
    def describe(cls, plan: SchedulerPlan) -> str:
        return f"race (a trial stops past {plan.margin or DEFAULT_MARGIN:g} x the best time to target so far)"


def recorded_times(folder: StudyFolder) -> list[float]:
    """The time to target of every trial the folder recorded (its record, read through the folder); --resume
    checked they read."""
    out = []
    for number, _ in folder.trial_dirs():
        record = folder.read_record(number)
        if record is None:
            continue
        t = record.value("time_to_target")
        if t is not None:
            out.append(float(t))
    return out
