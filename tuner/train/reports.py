"""Reports a trial makes while it trains (issue 20): one per timed window, and one at each rung budget.

The engine calls a `TrialReporter` when one is given; without one (`tuner train`) nothing changes. A window report
is read at the window's end, outside the timed region. A rung report follows a quality evaluation with the
workload's own evaluate(), done outside the timed windows and outside the training clock; a seconds budget with
the pre-flight's scoring estimate keeps one scoring per rung out of training's share, so the evaluations fit the
budget (README: "The budget is a contract").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tuner.study import TrialResult


class StopTrial(BaseException):
    """The scheduler stopped this trial at a rung (the reporter raises it from a report): it unwinds the engine,
    which re-raises it rather than record a failure; the driver already holds the trial's `stopped` record."""


@dataclass(frozen=True)
class WindowReport:
    """One timed window: the budget used so far (seconds or samples, the budget's unit) and the throughput so
    far (median of the windows read, and their spread)."""

    window: int  # 1-based
    budget_used: float
    samples: int
    throughput: float | None  # samples/s, median of the windows so far (all ranks together)
    throughput_spread: float | None  # (max - min) / median of the windows so far
    train_loss: float | None  # mean training loss over the window
    train_seconds: float | None = None  # the loop's training seconds so far, its evaluations excluded (the race's)
    time_to_target: float | None = None  # met the target at these training seconds (it reads its last windows)


@dataclass(frozen=True)
class RungReport:
    """A rung closed: what the trial measured up to `budget_used`, its quality at that budget included. `result`
    has state "stopped" (what the record says if a scheduler stops it here), `rung` and `measured_at` set."""

    rung: int  # 0-based
    budget_used: float
    result: TrialResult


@dataclass(frozen=True)
class PhaseReport:
    """The trial starts a phase its own process may not be able to end (a blocked step, a hung compile: issue 37),
    and how long it may take from now: "compile" (the compile limit) or "train" (the wall cap and what follows it).
    A search's driver ends the trial's process past that (tuner.search._watch). A reporter without `phase` gets
    none."""

    phase: str
    limit_s: float


class TrialReporter(Protocol):
    """What the engine reports to while it trains. `rungs`: the rung budgets (ascending, the budget's unit);
    the engine evaluates quality at each one below the trial's whole budget (the last rung is the trial's end)."""

    rungs: list[float]

    def window(self, report: WindowReport) -> None: ...

    def rung(self, report: RungReport) -> None: ...
