"""`tuner train` keeps scoring inside a seconds budget: the pre-flight's estimate of it is refused when it does not
fit (named in the one line), and otherwise kept out of training's share (score_reserve_seconds)."""

import json
import sys

import pytest

from tuner.cli import main
from tests.helpers.userworkloads import GOOD, write


@pytest.fixture
def scoring_takes(monkeypatch):
    preflight = sys.modules["tuner.train.preflight"]

    def plant(seconds):
        real = preflight._score_timed
        monkeypatch.setattr(preflight, "_score_timed", lambda *a, **k: (real(*a, **k)[0], seconds))

    return plant


def config(tmp_path, seconds):
    path = write(tmp_path, GOOD, name="good_budget.py")
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"workload: {path}:make\nbudget: {{seconds: {seconds}}}\nparams: {{batch_size: 8, device: cpu}}\n"
                   f"measure: {{warmup_steps: 1, min_windows: 1, window_min_steps: 1, window_min_seconds: 0.05, "
                   f"ceiling_seconds: 0}}\n")
    return cfg


def test_scoring_too_long_for_the_budget_is_refused_naming_it(tmp_path, capsys, scoring_takes):
    scoring_takes(50.0)
    assert main(["train", "--config", str(config(tmp_path, 5)), "--reports-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "scoring (evaluate()) about 50 s more" in err and "--budget-seconds 61 or more" in err  # (0.05 s of windows + 50 s) x 1.2
    assert not (tmp_path / "r" / "train").exists()


def test_the_estimate_is_kept_out_of_training(tmp_path, capsys, scoring_takes):
    scoring_takes(0.5)
    assert main(["train", "--config", str(config(tmp_path, 2)), "--reports-dir", str(tmp_path / "r"),
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # The pre-flight's step is planted faster than the run's (tests/conftest.py), so the run keeps more than the
    # estimate (the run's step is slower per sample: up to 4x), never more than 90% of the budget.
    assert 0.5 <= out["score_reserve_seconds"] <= 0.9 * 2 and out["state"] == "complete"


def test_the_default_budget_grows_to_what_the_step_needs_and_says_so(tmp_path, capsys, monkeypatch):
    """No budget in the config nor on the command line: the 20 s default is raised to the budget the pre-flight's
    step needs, with one line saying what it measured and how to choose; a budget the config gives is refused."""
    monkeypatch.setattr(sys.modules["tuner.train.preflight"], "_train_steps", lambda *a, **k: 3.0)  # a 3-s step
    cfg = config(tmp_path, 5)
    text = cfg.read_text().replace("budget: {seconds: 5}\n", "")
    cfg.write_text(text.replace("min_windows: 1, window_min_steps: 1", "min_windows: 3, window_min_steps: 3"))
    seen = {}

    def fake_run_trial(c, **_):
        seen["budget"] = c.budget.seconds
        from tuner.study import TrialResult

        return TrialResult(state="complete", device="cpu")

    monkeypatch.setattr(sys.modules["tuner.train"], "run_trial", fake_run_trial)
    assert main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r"), "--format", "json"]) == 0
    err = capsys.readouterr().err
    # 1 warm-up step and 3 windows of 3 steps at 3 s: 30 s, a fifth more: 36, rounded up to 40
    assert seen["budget"] == 40 and "default 20 s budget is too short" in err and "training 40 s instead" in err
    assert "--budget-seconds" in err
    cfg.write_text(text.replace("params:", "budget: {seconds: 20}\nparams:", 1).replace(
        "min_windows: 1, window_min_steps: 1", "min_windows: 3, window_min_steps: 3"))
    assert main(["train", "--config", str(cfg), "--reports-dir", str(tmp_path / "r2")]) == 2
    assert "a 20 s budget is too short" in capsys.readouterr().err
