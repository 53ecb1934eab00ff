"""The scheduler registry: one line registers a scheduler; the plan, --scheduler's check and study.json read it."""

from __future__ import annotations

import pytest

from tuner.config import Budget
from tuner.errors import ConfigError
from tuner.schedule import (FIFO, ParetoASHA, Race, SchedulerPlan, build_scheduler, names, plan_scheduler,
                            saved_scheduler, scheduler_help)


def test_the_three_schedulers_are_registered_by_name_and_the_help_lists_them() -> None:
    assert names()[:3] == ("fifo", "asha", "race")
    assert all(f"{n}:" in scheduler_help() for n in ("fifo", "asha", "race"))
    with pytest.raises(ConfigError, match="unknown scheduler 'hyperband'; use one of fifo, asha, race"):
        plan_scheduler("hyperband", None, None, Budget(seconds=9))


def test_fifo_and_asha_plans_read_and_write_study_json_as_before() -> None:
    fifo = plan_scheduler(None, None, None, Budget(seconds=18))
    assert fifo == SchedulerPlan() and fifo.to_json() == {"name": "fifo", "eta": None, "min_budget": None,
                                                          "rungs": []}
    asha = plan_scheduler("asha", None, None, Budget(seconds=18))
    assert asha.to_json() == {"name": "asha", "eta": 3.0, "min_budget": 2.0, "rungs": [2.0, 6.0, 18.0]}
    assert saved_scheduler(asha.to_json()) == asha and saved_scheduler(None) == fifo
    assert asha.describe() == "asha (eta 3, rungs at 2, 6, 18)"
    assert fifo.describe() == "fifo (every trial runs its whole budget)"
    with pytest.raises(ConfigError, match="--min-budget and --eta set the rungs of --scheduler asha"):
        plan_scheduler("fifo", 1.0, None, Budget(seconds=18))
    with pytest.raises(ConfigError, match="--eta must be > 1"):
        plan_scheduler("asha", None, 1.0, Budget(seconds=18))


def test_each_plan_builds_its_own_scheduler() -> None:
    from tuner.study import Objective

    objectives = [Objective(metric="throughput", direction="max"), Objective(metric="loss", direction="min")]
    assert isinstance(build_scheduler(SchedulerPlan(), objectives, None), FIFO)
    asha = build_scheduler(plan_scheduler("asha", None, None, Budget(samples=900)), objectives, None)
    assert isinstance(asha, ParetoASHA) and asha.rungs == [100.0, 300.0, 900.0]
    race = build_scheduler(plan_scheduler("race", None, None, Budget(seconds=9), target=True), objectives, None)
    assert isinstance(race, Race) and race.best is None
