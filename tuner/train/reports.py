"""Reports a trial makes while it trains (issue 20): one per timed window, and one at each rung budget.

The engine calls a `TrialReporter` when one is given; without one (`tuner train`) nothing changes. A window report
is read at the window's end, outside the timed region. A rung report follows a quality evaluation with the
workload's own evaluate(), done outside the timed windows and outside the training clock; a seconds budget with
the pre-flight's scoring estimate keeps one scoring per rung out of training's share, so the evaluations fit the
budget (README: "The budget is a contract"). The report types are tuner.study.reports' (one set, which the search
protocol carries and the schedulers read); a reporter without `phase` gets no PhaseReport.
"""

from __future__ import annotations

from typing import Protocol

from tuner.study import PhaseReport, RungReport, WindowReport


class StopTrial(BaseException):
    """The scheduler stopped this trial at a rung (the reporter raises it from a report): it unwinds the engine,
    which re-raises it rather than record a failure; the driver already holds the trial's `stopped` record."""


class TrialReporter(Protocol):
    """What the engine reports to while it trains. `rungs`: the rung budgets (ascending, the budget's unit);
    the engine evaluates quality at each one below the trial's whole budget (the last rung is the trial's end)."""

    rungs: list[float]

    def window(self, report: WindowReport) -> None: ...

    def rung(self, report: RungReport) -> None: ...


__all__ = ["PhaseReport", "RungReport", "StopTrial", "TrialReporter", "WindowReport"]
