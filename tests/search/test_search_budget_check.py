"""A study's pre-flight times the step on the device its trials train on, whatever its kind, and refuses a budget
too short for that step and its scoring before Ray starts, naming the budget it needs (a fake GPU here)."""

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from tests.helpers.fakes import FakeCudaDevice
from tests.helpers.spaces_for_tests import tiny_space
from tuner.errors import BudgetError
from tuner.search._check import check_plan
from tuner.search._options import SearchOptions
from tuner.search._plan import plan_search


def plan(tmp_path, seconds):
    tmp_path.mkdir(parents=True, exist_ok=True)
    space = tmp_path / "tiny.yaml"
    space.write_text(tiny_space(2))
    return plan_search(SearchOptions(space=str(space), budget_seconds=seconds, reports_dir=tmp_path / "r"))


@pytest.fixture
def slow_step(monkeypatch):
    """The pre-flight's step takes 2 s, wherever it runs."""
    preflight = sys.modules["tuner.train.preflight"]
    monkeypatch.setattr(preflight, "_train_steps", lambda *a, **k: 2.0)


def test_gpu_trials_too_slow_for_the_budget_are_refused_naming_the_device_and_the_budget(tmp_path, slow_step):
    gpu = FakeCudaDevice()
    with pytest.raises(BudgetError, match=rf"a 5 s budget is too short .* on {re.escape(gpu.describe())}.* give "
                                          rf"--budget-seconds \d+ or more"):
        check_plan(plan(tmp_path, 5), gpu)


def test_a_budget_that_holds_the_step_passes_and_no_device_checks_nothing(tmp_path, slow_step):
    check_plan(plan(tmp_path, 60), FakeCudaDevice())  # 2 warm-up steps and 3 windows of 3 steps: 22 s
    check_plan(plan(tmp_path / "b", 5))  # a cluster's trials or a resume: not timed here, not checked


def default_plan(tmp_path, seconds, **opts):
    """A plan whose budget is the space's default (`seconds`): the user gave none."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    space = tmp_path / "tiny.yaml"
    space.write_text(tiny_space(2).replace("budget: {samples: 128}", f"budget: {{seconds: {seconds}}}"))
    return plan_search(SearchOptions(space=str(space), reports_dir=tmp_path / "r", **opts))


def test_a_default_budget_too_short_is_raised_to_the_one_the_step_needs_and_said(tmp_path, slow_step):
    plan = default_plan(tmp_path, 5)
    plan = check_plan(plan, FakeCudaDevice())  # not refused: the user gave no budget
    # 2 warm-up steps and 3 windows of 3 steps at 2 s: 22 s, a fifth more: 27, rounded up to 30
    assert plan.budget.seconds == 30
    assert plan.sized is not None and "the space's 5 s budget is too short" in plan.sized
    assert "2 s in the pre-flight" in plan.sized and "30 s instead" in plan.sized and "--budget-seconds" in plan.sized
    assert (plan.preflight.sized.from_, plan.preflight.sized.to) == (5, 30) and plan.preflight.step_seconds == 2.0


def test_the_sized_budget_is_a_new_plan_made_once_and_no_plan_changes_after(tmp_path, slow_step):
    """The budget reads in one direction: check_plan makes the plan the trials run (30 s) and leaves the planned one
    (the space's 5 s) as it was; neither can be changed afterwards, and the trials' shared config carries 30 s."""
    from tuner.config import Budget
    from tuner.search._options import trial_base

    planned = default_plan(tmp_path, 5, scheduler="asha")
    final = check_plan(planned, FakeCudaDevice())
    assert planned.budget.seconds == 5 and planned.sized is None and planned.preflight.sized is None
    assert planned.scheduler.rungs[-1] == 5
    assert final.budget.seconds == 30 and final.scheduler.rungs[-1] == 30 and final.preflight.sized.to == 30
    for plan in (planned, final):
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.budget = Budget(seconds=60)
    assert trial_base(final, 0, "cpu")["budget"] == {"seconds": 30}


def test_a_sized_asha_study_moves_its_rungs_with_the_budget(tmp_path, slow_step):
    plan = default_plan(tmp_path, 5, scheduler="asha")
    plan = check_plan(plan, FakeCudaDevice())
    assert plan.budget.seconds == 30 and plan.scheduler.rungs[-1] == 30 and len(plan.scheduler.rungs) == 3


def test_a_default_budget_that_fits_is_kept(tmp_path, slow_step):
    plan = default_plan(tmp_path, 60)
    plan = check_plan(plan, FakeCudaDevice())
    assert plan.budget.seconds == 60 and plan.sized is None and plan.preflight.sized is None


def test_asha_s_rung_evaluations_count_in_the_budget_check(tmp_path, monkeypatch):
    """Scoring at each of asha's three rungs: three scorings must fit beside the windows, not one."""
    preflight = sys.modules["tuner.train.preflight"]
    monkeypatch.setattr(preflight, "_train_steps", lambda *a, **k: 0.01)
    real = preflight._score_timed
    monkeypatch.setattr(preflight, "_score_timed", lambda *a, **k: (real(*a, **k)[0], 4.0))
    tmp_path.mkdir(parents=True, exist_ok=True)
    space = tmp_path / "tiny.yaml"
    space.write_text(tiny_space(2).replace("objectives:\n  cnn: [{metric: throughput, direction: max}, "
                                           "{metric: loss, direction: min}]",
                                           "objectives: [{metric: throughput, direction: max}, {metric: quality}]"))
    check_plan(plan_search(SearchOptions(space=str(space), budget_seconds=10, reports_dir=tmp_path / "f")),
               FakeCudaDevice())  # fifo: one scoring (4 s) fits 10 s
    with pytest.raises(BudgetError, match=r"scoring \(evaluate\(\)\) about 12 s more"):
        check_plan(plan_search(SearchOptions(space=str(space), budget_seconds=10, scheduler="asha",
                                             reports_dir=tmp_path / "a")), FakeCudaDevice())


def heavy_space(tmp_path, budget: str) -> SearchOptions:
    """Effective batches 64 or 512 split into micro-batches 16-256 and accumulation 1-2: the baseline trains batch
    64 x 1, the slowest trial 256 x 2."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    space = tmp_path / "heavy.yaml"
    space.write_text("effective_batch: {type: categorical, choices: [64, 512]}\n" + tiny_space(2).replace("budget: {samples: 128}", f"budget: {budget}").replace(
        "choices: [16, 32]}", "choices: [16, 64, 256]}\n  accumulation_steps: {type: int, low: 1, high: 2}"))
    return SearchOptions(space=str(space), reports_dir=tmp_path / "r")


@pytest.fixture
def step_grows_with_batch(monkeypatch):
    """The pre-flight's step takes 20 ms per 16 samples of each micro-batch it accumulates: batch 64 x 1 takes
    0.08 s, batch 256 x 2 takes 0.64 s. Records the (batch_size, accumulation_steps) of each timing."""
    preflight = sys.modules["tuner.train.preflight"]
    timed = []

    def step(workload, models, train_set, cfg, device):
        timed.append((cfg.params.batch_size, cfg.params.accumulation_steps))
        return 0.02 * cfg.params.batch_size / 16 * cfg.params.accumulation_steps

    monkeypatch.setattr(preflight, "_train_steps", step)
    return timed


def test_a_budget_that_holds_the_baseline_but_not_the_largest_micro_batch_is_kept_and_the_note_says_so(
        tmp_path, step_grows_with_batch):
    """5 s hold the baseline's 0.08 s step (2 warm-up steps and 3 windows of 3: under 1 s), not batch 256 x 2's
    0.64 s (7.0 s): the budget stays (sizing every trial for the few sampled at the top would multiply the default
    study's length), and one note names that step and the budget that measures it fully."""
    plan = plan_search(dataclasses.replace(heavy_space(tmp_path, "{seconds: 60}"), budget_seconds=5.0))
    plan = check_plan(plan, FakeCudaDevice())
    assert step_grows_with_batch == [(64, 1), (256, 1)]  # the largest micro-batch timed once, times accumulation
    assert plan.budget.seconds == 5 and plan.sized is None
    assert re.search(r"trials at the space's largest micro-batch, batch 256 x 2 accumulation need about 9 s: .*"
                     r"0\.64 s in the pre-flight.*--budget-seconds 9", plan.heavy_note)
    assert plan.preflight.heaviest.batch_size == 256 and plan.preflight.heaviest.needs_budget == 9


def test_a_default_budget_is_sized_on_the_baseline_s_step_and_the_slowest_step_is_a_note(tmp_path,
                                                                                          step_grows_with_batch):
    plan = plan_search(heavy_space(tmp_path, "{seconds: 0.5}"))
    plan = check_plan(plan, FakeCudaDevice())
    assert plan.budget.seconds == 2  # 0.08 s x (2 + 3 x 3) steps = 0.88 s, a fifth more, whole seconds
    assert "0.08 s in the pre-flight (batch 64 on" in plan.sized
    assert "batch 256 x 2 accumulation need about 9 s" in plan.heavy_note
    assert plan.preflight.step_seconds == pytest.approx(0.08)


def test_a_largest_micro_batch_that_fits_the_budget_adds_no_note(tmp_path, step_grows_with_batch):
    plan = plan_search(heavy_space(tmp_path, "{seconds: 30}"))
    plan = check_plan(plan, FakeCudaDevice())
    assert plan.budget.seconds == 30 and plan.heavy_note is None and plan.sized is None
    assert plan.preflight.heaviest.needs_budget is None


def test_a_kept_effective_batch_times_no_heavier_step_than_the_baseline_s(tmp_path, step_grows_with_batch):
    """Without effective_batch: the space splits the workload's own 64, so no trial runs 256 x 2 however wide the
    domains: the pre-flight times the baseline's step alone and no note sends the user to a bigger budget."""
    options = heavy_space(tmp_path, "{seconds: 5}")
    text = Path(options.space).read_text()
    Path(options.space).write_text(text.replace("effective_batch: {type: categorical, choices: [64, 512]}\n", ""))
    plan = plan_search(options)
    plan = check_plan(plan, FakeCudaDevice())
    assert step_grows_with_batch == [(64, 1)]
    assert plan.heavy_note is None and plan.preflight.heaviest is None


def test_a_largest_micro_batch_that_fails_in_the_pre_flight_is_the_trial_s_state_not_a_refusal(tmp_path,
                                                                                              monkeypatch):
    preflight = sys.modules["tuner.train.preflight"]

    def step(workload, models, train_set, cfg, device):
        if cfg.params.batch_size > 64:
            raise MemoryError("out of memory at batch 256")
        return 0.001

    monkeypatch.setattr(preflight, "_train_steps", step)
    plan = plan_search(heavy_space(tmp_path, "{seconds: 5}"))
    plan = check_plan(plan, FakeCudaDevice())
    assert plan.budget.seconds == 5 and plan.preflight.heaviest is None
