"""`--scheduler fifo`: every trial trains its whole budget; nothing is stopped early (Tune's default order)."""

from __future__ import annotations

from tuner.schedule._base import CONTINUE, Decision, Progress, Scheduler, SchedulerPlan


class FIFO(Scheduler):
    """Goes on at every report."""

    help = "every trial trains its whole budget"
    decides = False  # Ray Tune's own FIFO order does the same

    def decide(self, progress: Progress) -> Decision:
        return CONTINUE

    @classmethod
    def describe(cls, plan: SchedulerPlan) -> str:
        return "fifo (every trial runs its whole budget)"
