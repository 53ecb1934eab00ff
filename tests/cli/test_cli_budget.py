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
    assert out["score_reserve_seconds"] == 0.5 and out["state"] == "complete"
