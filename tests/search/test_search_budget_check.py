"""A study's pre-flight times the step on the device its trials train on, whatever its kind, and refuses a budget
too short for that step and its scoring before Ray starts, naming the budget it needs (a fake GPU here)."""

import re
import sys

import pytest

from tests.helpers.fakes import FakeCudaDevice
from tests.helpers.spaces_for_tests import tiny_space
from tuner.errors import BudgetError
from tuner.search._options import SearchOptions, check_plan, plan_search


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
