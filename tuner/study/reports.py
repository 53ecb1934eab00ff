"""What a trial tells while it trains and when it ends: the one set of report types (issue 53).

The engine makes them (tuner.train's loop, through its `TrialReporter`), the search protocol carries them across
Ray as plain data (tuner.search._protocol's `to_tune` / `from_tune`, the only code that knows their keys), and a
scheduler reads them (tuner.schedule's `Progress.of`). They sit here, beneath all three and free of torch and Ray,
so a field added to a report is added once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from tuner.study.record import TrialRecord, TrialResult


@dataclass(frozen=True)
class StartReport:
    """A DDP trial's first report, before its workload builds: it names the workers' placement group
    (tuner.search._ddp) so a trial ended then still gives them back."""


@dataclass(frozen=True)
class WindowReport:
    """One timed window closed: the budget used so far (seconds or samples, the budget's unit) and the throughput
    so far (the windows' samples / their seconds, and their spread). Read at the window's end, outside the timed
    region."""

    window: int  # 1-based
    budget_used: float
    samples: int
    throughput: float | None = None  # samples/s over the windows so far (all ranks together)
    throughput_spread: float | None = None  # (max - min) / median of the windows so far
    train_loss: float | None = None  # mean training loss over the window
    train_seconds: float | None = None  # the loop's training seconds so far, its evaluations excluded (the race's)
    time_to_target: float | None = None  # met the target at these training seconds (it reads its last windows)


@dataclass(frozen=True)
class PhaseReport:
    """The trial starts a phase its own process may not be able to end (a blocked step, a hung compile: issue 37),
    and how long it may take from now: "compile" (the compile limit) or "train" (the wall cap and what follows it).
    A search's driver ends the trial's process past that (tuner.search._watch)."""

    phase: str
    limit_s: float


@dataclass(frozen=True)
class RungReport:
    """A rung closed: what the trial measured up to `budget_used`, its quality at that budget included. The
    engine's `result` has state "stopped" (what the record says if a scheduler stops it here), `rung` and
    `measured_at` set; the trial process makes it its record (a TrialRecord) and adds the objective `values`
    there (penalties where one is not finite, `feasible` False) before it crosses Ray."""

    rung: int  # 0-based
    budget_used: float
    result: TrialResult
    values: dict[str, float] = field(default_factory=dict)
    feasible: bool = True

    @property
    def record(self) -> TrialRecord:
        """The `stopped` record the driver keeps if the scheduler stops the trial here (a report from the trial
        process; the engine's own holds a bare TrialResult)."""
        if not isinstance(self.result, TrialRecord):
            raise TypeError("an engine's rung report holds no record yet (tuner.search._trial.rung_report makes it)")
        return self.result


@dataclass(frozen=True)
class FinalReport:
    """The trial's outcome: finite objective values (penalties unless feasible) and its record; a trial that
    trained its whole budget under a rung scheduler also closes the top rung (`rung`, `budget_used`)."""

    values: dict[str, float]
    feasible: bool
    record: TrialRecord
    rung: int | None = None
    budget_used: float | None = None
    stopped: bool = False  # a scheduler stopped it (the race, with a state of its own): told to Optuna as PRUNED


TrialReport = Union[StartReport, WindowReport, PhaseReport, RungReport, FinalReport]

__all__ = ["FinalReport", "PhaseReport", "RungReport", "StartReport", "TrialReport", "WindowReport"]
