"""A study-level wall-time allowance (`tuner search --study-seconds S`): a budget is a promise.

S bounds the whole invocation (pre-flight, probes, trials, confirmation) plus MARGIN. The study starts no trial that
cannot finish in what is left after reserving the confirmation phase; trials already running are never killed
(they finish, or a rung scheduler stops them at a rung). That is why the check sits in the searcher (it stops
proposing: Searcher.FINISHED) and not in Ray Tune's TuneConfig(time_budget_s=...), which stops running trials
mid-window and would leave their figures unrecorded.

A trial's wall time is estimated from the pre-flight (the budget, or the samples at the timed step, plus scoring
and a per-trial set-up allowance) until trials finish; then from the median trial that ran its whole budget
uncapped (a trial cut at its wall-time cap says what the cap is, not what a trial takes: counting the slowest made
one capped trial reserve a third of the default study's allowance; what a capped trial overruns is the margin's).
The confirmation phase is reserved as (K + baseline) x R re-runs at that estimate. No Ray here.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tuner.config import MAX_SECONDS, Budget
from tuner.errors import BudgetError, ConfigError

# A trial's own set-up outside the budget (its process, the dataset, the models, Ray's hand-over): the pre-flight's
# estimate adds this until finished trials say how long they really take.
SETUP_S = 5.0
# What S may be overrun by: Ray's start and stop, the study's own writes, and a trial slower than the ones before
# it. Stated in README; the tests hold the recorded wall time to S + margin.
MARGIN_FRACTION = 0.1
MARGIN_MIN_S = 20.0
# Between the planning step's check and the first trial: Ray's start, its Tune run's and the loader probes (about
# 2 s and 7 s of the default study's 16 s before its first trial on 2 cores, benchmarks/results/run-full.json; the
# rest, the pre-flight, is spent when the check runs). A 78 s allowance with 9.8 s trials and 6 re-runs to reserve
# passed a check without it and then started no trial, not even the baseline.
START_S = 10.0
# At most this many trials when --study-seconds is given without --trials ("as many as fit").
MAX_TRIALS = 1000


def margin(seconds: float) -> float:
    return max(MARGIN_MIN_S, MARGIN_FRACTION * seconds)


def check_seconds(seconds: float | None) -> None:
    """One line for a value no clock can keep."""
    if seconds is None:
        return
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        raise ConfigError(f"--study-seconds must be a finite number of seconds > 0 and at most {MAX_SECONDS:g} (got "
                          f"{seconds:g}); leave it out to run --trials trials whatever they take")


def trial_training_s(budget: Budget, step_seconds: float | None, step_samples: int | None) -> float:
    """One trial's training as the pre-flight sees it: its budget's seconds, or its samples at the timed step's
    pace (0 where neither is known). The allowance, the probes' longest reading and the env probes' share all read
    this one figure."""
    if budget.seconds is not None:
        return float(budget.seconds)
    if budget.samples is not None and step_seconds and step_samples:
        return budget.samples / step_samples * step_seconds
    return 0.0


def preflight_trial_s(budget: Budget, step_seconds: float | None, step_samples: int | None,
                      score_seconds: float | None) -> float:
    """One trial's wall time as the pre-flight sees it: its training budget, scoring and set-up."""
    return trial_training_s(budget, step_seconds, step_samples) + (score_seconds or 0.0) + SETUP_S


@dataclass
class Allowance:
    """This invocation's wall-time allowance. `started` and `clock` read the same monotonic clock."""

    seconds: float
    started: float
    confirm_runs: int  # (K + baseline) x R re-runs to reserve
    trial_s: float  # the pre-flight's estimate of one trial's wall time
    clock: Callable[[], float] = time.perf_counter
    observed: list[float] = field(default_factory=list)  # wall times of finished whole-budget, uncapped trials
    ended: bool = False  # the searcher stopped starting trials because the time was spent

    @property
    def deadline(self) -> float:
        return self.started + self.seconds

    def left(self) -> float:
        return self.deadline - self.clock()

    def trial_estimate(self) -> float:
        """The median whole-budget trial so far (plus a tenth), or the pre-flight's estimate before any."""
        return 1.1 * statistics.median(self.observed) if self.observed else self.trial_s

    def confirm_reserve(self) -> float:
        return self.confirm_runs * self.trial_estimate()

    def may_start(self) -> bool:
        """Whether one more trial fits before the confirmation phase's reserve; once not, never again."""
        if not self.ended and self.left() - self.confirm_reserve() < self.trial_estimate():
            self.ended = True
        return not self.ended

    def ending(self) -> str:
        """What the live view says when the allowance ended the search."""
        return (f"--study-seconds {self.seconds:g}: {max(0.0, self.left()):.0f} s left, kept for the confirmation "
                f"({self.confirm_reserve():.0f} s reserved) and short of one more trial (about "
                f"{self.trial_estimate():.0f} s): no further trial started")

    def finished(self, run_seconds: float | None, whole: bool, capped: bool = False) -> None:
        """A trial ended; one that ran its whole budget (complete, not stopped at a rung) and was not cut at its
        wall-time cap teaches the estimate."""
        if whole and not capped and run_seconds is not None and run_seconds > 0:
            self.observed.append(float(run_seconds))

    def parity_share(self) -> float:
        """The seconds the study's numerics parity check may take: half of what is left after the probes
        (START_S), one trial and the confirmation's reserve, so the trials keep the other half."""
        return max(0.0, (self.left() - START_S - self.trial_estimate() - self.confirm_reserve()) / 2)

    def check_fits(self) -> None:
        """Refuse, at the planning step, an allowance whose time left (the pre-flight is spent by then) cannot hold
        the start (START_S), one trial and the confirmation's reserve at the pre-flight's estimate: the searcher
        would start no trial, not even the baseline, and the study would end with nothing to export."""
        reserve = self.confirm_runs * self.trial_s
        left = self.left()
        if left < START_S + self.trial_s + reserve:
            fits = math.ceil(1.2 * (self.seconds - left + START_S + self.trial_s + reserve))
            kept = (f"the confirmation's {self.confirm_runs} re-runs reserve {reserve:.0f} s, " if self.confirm_runs
                    else "")
            raise BudgetError(f"--study-seconds {self.seconds:g} leaves no room for one trial: {max(0.0, left):.0f} s "
                              f"left after the pre-flight; {kept}one trial takes about {self.trial_s:.0f} s and "
                              f"starting Ray about {START_S:.0f} s; give --study-seconds {fits} or more, a shorter "
                              f"budget (--budget-seconds/--budget-samples), or fewer confirmation re-runs "
                              f"(--confirm/--repeats)")

    def to_json(self, spent: float | None = None) -> dict[str, Any]:
        """What study.json keeps of this invocation's allowance."""
        out: dict[str, Any] = {"seconds": self.seconds, "margin_s": round(margin(self.seconds), 1),
                               "trial_estimate_s": round(self.trial_estimate(), 1),
                               "confirm_reserve_s": round(self.confirm_reserve(), 1), "ended_search": self.ended}
        if spent is not None:
            out["spent_s"] = round(spent, 1)
        return out


def confirm_runs(confirm_trials: int, repeats: int) -> int:
    """Re-runs the confirmation phase is reserved for: K front trials and the baseline, R times each."""
    return (confirm_trials + 1) * repeats if confirm_trials > 0 else 0
