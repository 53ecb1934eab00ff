"""The study's scheduler on the search's side: its plan from the options (the registry's, tuner.schedule), the Ray
Tune adapter it runs under, and what it keeps beside each trial (trials/NNNN/rungs.json) so --resume rebuilds it
as it was. No scheduler is named here: each says for itself what it plans, builds and keeps."""

from __future__ import annotations

from typing import Any

from tuner.schedule import (DEFAULT_SCHEDULER, RUNGS_FILE, SchedulerPlan, build_scheduler, kind_of, names,
                            plan_scheduler, saved_scheduler, write_kept)
from tuner.study import Objective, StudyFolder

__all__ = ["DEFAULT_SCHEDULER", "RUNGS_FILE", "SchedulerPlan", "check_stored_entries", "make_scheduler", "names",
           "plan_scheduler", "saved_scheduler", "write_rungs"]


def make_scheduler(plan: SchedulerPlan, objectives: list[Objective], folder: StudyFolder) -> Any:
    """The Ray Tune scheduler: None (Tune's default) for one that never stops a trial, else the adapter around
    the plan's scheduler, rebuilt with what the folder kept (after reconcile_study: a trial running at a kill
    brings none back)."""
    scheduler = build_scheduler(plan, objectives, folder)
    if not scheduler.decides:
        return None
    from tuner.search._scheduler import TuneScheduler

    return TuneScheduler(scheduler, objectives)


def write_rungs(folder: StudyFolder, number: int, scheduler: Any) -> None:
    """What the scheduler keeps for one trial, beside it (nothing when it keeps nothing)."""
    kept = scheduler.scheduler.kept(str(number)) if scheduler is not None else None
    if kept is not None:
        write_kept(folder, number, kept)


def check_stored_entries(folder: StudyFolder, saved: dict[str, Any] | None) -> None:
    """On --resume, before anything runs: what the study's scheduler (study.json's `saved`) kept reads, else a
    StudyError names the file; nothing on disk changes."""
    kind_of(saved_scheduler(saved).name).check_kept(folder)
