"""Schedulers: who goes on, pauses or stops at each report of a trial. Ray-free (tuner.search adapts them).

A scheduler is one class with one method, `decide(Progress) -> Decision`, registered by name in one line below;
`--scheduler`, its options' flags (each scheduler's `options`), the study's plan and study.json read the registry
(tuner.schedule._base).
"""

from tuner.schedule._base import (CONTINUE, DEFAULT_SCHEDULER, PAUSE, STOP, Decision, PlanRequest, Progress,
                                  Scheduler, SchedulerOption, SchedulerPlan, build_scheduler, kind_of, names,
                                  plan_scheduler, register, saved_scheduler, scheduler_help, scheduler_options,
                                  unregister)
from tuner.schedule._kept import RUNGS_FILE, kept_entries, write_kept
from tuner.schedule.asha import ParetoASHA, RungEntry, crowding, fronts, goes_on, ranking, rung_budgets
from tuner.schedule.fifo import FIFO
from tuner.schedule.race import Race

register("fifo", FIFO)
register("asha", ParetoASHA)
register("race", Race)

__all__ = ["CONTINUE", "DEFAULT_SCHEDULER", "FIFO", "PAUSE", "RUNGS_FILE", "STOP", "Decision", "ParetoASHA",
           "PlanRequest", "Progress", "Race", "RungEntry", "Scheduler", "SchedulerOption", "SchedulerPlan",
           "build_scheduler",
           "crowding", "fronts", "goes_on", "kept_entries", "kind_of", "names", "plan_scheduler", "ranking",
           "register", "rung_budgets", "saved_scheduler", "scheduler_help", "scheduler_options", "unregister",
           "write_kept"]
