"""The scheduler registry: one line registers a scheduler; the plan, --scheduler's check and study.json read it."""

from __future__ import annotations

import pytest

from tuner.config import Budget
from tuner.errors import ConfigError
from tuner.schedule import (FIFO, ParetoASHA, Race, SchedulerOption, SchedulerPlan, build_scheduler, names,
                            plan_scheduler, register, saved_scheduler, scheduler_help, scheduler_options, unregister)


def test_the_three_schedulers_are_registered_by_name_and_the_help_lists_them() -> None:
    assert names()[:3] == ("fifo", "asha", "race")
    assert all(f"{n}:" in scheduler_help() for n in ("fifo", "asha", "race"))
    with pytest.raises(ConfigError, match="unknown scheduler 'hyperband'; use one of fifo, asha, race"):
        plan_scheduler("hyperband", Budget(seconds=9))


def test_fifo_and_asha_plans_read_and_write_study_json_as_before() -> None:
    fifo = plan_scheduler(None, Budget(seconds=18))
    assert fifo == SchedulerPlan() and fifo.to_json() == {"name": "fifo", "eta": None, "min_budget": None,
                                                          "rungs": []}
    asha = plan_scheduler("asha", Budget(seconds=18))
    assert asha.to_json() == {"name": "asha", "eta": 3.0, "min_budget": 2.0, "rungs": [2.0, 6.0, 18.0]}
    assert saved_scheduler(asha.to_json()) == asha and saved_scheduler(None) == fifo
    assert asha.describe() == "asha (eta 3, rungs at 2, 6, 18)"
    assert fifo.describe() == "fifo (every trial runs its whole budget)"
    with pytest.raises(ConfigError, match="--min-budget and --eta set the rungs of --scheduler asha"):
        plan_scheduler("fifo", Budget(seconds=18), {"min_budget": 1.0})
    with pytest.raises(ConfigError, match="--eta must be > 1"):
        plan_scheduler("asha", Budget(seconds=18), {"eta": 1.0})


def test_each_plan_builds_its_own_scheduler() -> None:
    from tuner.study import Objective

    objectives = [Objective(metric="throughput", direction="max"), Objective(metric="loss", direction="min")]
    assert isinstance(build_scheduler(SchedulerPlan(), objectives, None), FIFO)
    asha = build_scheduler(plan_scheduler("asha", Budget(samples=900)), objectives, None)
    assert isinstance(asha, ParetoASHA) and asha.rungs == [100.0, 300.0, 900.0]
    race = build_scheduler(plan_scheduler("race", Budget(seconds=9), target=True), objectives, None)
    assert isinstance(race, Race) and race.best is None


class Patient(FIFO):
    """A planted scheduler with an option of its own, declared here only (issue 53 item 2)."""

    help = "waits (--patience)"
    options = (SchedulerOption("patience", "--patience", "With --scheduler patient: how long it waits.", "the wait",
                               metavar="N"),)

    @classmethod
    def plan(cls, name, ask):
        if ask.patience is not None and not ask.patience > 0:
            raise ConfigError(f"--patience must be > 0 (got {ask.patience:g})")
        return SchedulerPlan.of(name, patience=2.0 if ask.patience is None else float(ask.patience))

    @classmethod
    def describe(cls, plan):
        return f"patient (waits {plan.patience:g})"


@pytest.fixture
def patient_registered():
    register("patient", Patient)  # its module (above) and this line: nothing else names its option
    yield
    unregister("patient")


def test_a_scheduler_with_an_option_is_one_class_and_its_registry_line(patient_registered) -> None:
    """The option reaches the flags' list, the plan, study.json and back, and another scheduler refuses it naming
    its owner; the CLI turns each registered option into a flag with its help."""
    import typer
    from typer.testing import CliRunner

    from tuner.cli.search import with_scheduler_options

    assert [o.flag for o in scheduler_options()] == ["--min-budget", "--eta", "--race-margin", "--patience"]
    plan = plan_scheduler("patient", Budget(seconds=9), {"patience": 5.0})
    assert plan.patience == 5.0 and plan.describe() == "patient (waits 5)"
    assert plan.to_json() == {"name": "patient", "eta": None, "min_budget": None, "rungs": [], "patience": 5.0}
    assert saved_scheduler(plan.to_json()) == plan
    assert plan_scheduler("patient", Budget(seconds=9)).patience == 2.0
    with pytest.raises(ConfigError, match=r"--patience sets the wait of --scheduler patient \(this study's "
                                          r"scheduler: asha\); add --scheduler patient or drop --patience"):
        plan_scheduler("asha", Budget(seconds=9), {"patience": 5.0})
    with pytest.raises(ConfigError, match="--patience must be > 0"):
        plan_scheduler("patient", Budget(seconds=9), {"patience": -1.0})

    seen = {}
    cli = typer.Typer()

    @cli.command()
    @with_scheduler_options
    def run(scheduler: str = "fifo", **given: float) -> None:
        seen.update(given, scheduler=scheduler)

    runner = CliRunner()
    assert runner.invoke(cli, ["--scheduler", "patient", "--patience", "4"]).exit_code == 0
    assert seen["patience"] == 4.0 and seen["scheduler"] == "patient" and seen["race_margin"] is None
    shown = runner.invoke(cli, ["--help"]).output
    assert "--patience" in shown and "how long" in shown


def test_a_planted_schedulers_option_reaches_the_study_plan_through_tuner_search_unchanged(patient_registered,
                                                                                          tmp_path) -> None:
    """`tuner search`'s options carry the planted scheduler's option by its key, and plan_search makes it the
    study's plan (what study.json keeps) without tuner.search naming it."""
    from tuner.search import SearchOptions, plan_search

    plan = plan_search(SearchOptions(space="amp_loader", reports_dir=tmp_path, scheduler="patient",
                                     scheduler_options={"patience": 4.0}))
    assert plan.scheduler.patience == 4.0 and plan.scheduler.describe() == "patient (waits 4)"
    assert saved_scheduler(plan.scheduler.to_json()) == plan.scheduler
    with pytest.raises(ConfigError, match="--patience must be > 0"):
        plan_search(SearchOptions(space="amp_loader", reports_dir=tmp_path, scheduler="patient",
                                  scheduler_options={"patience": 0.0}))
    assert list(tmp_path.iterdir()) == []  # planned only: nothing on disk
