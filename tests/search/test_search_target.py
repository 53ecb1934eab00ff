"""A study with a target (issue 34), in process on a planted user workload: --target reaches every trial's config,
study.json keeps it and how it was set, each trial records its quality curve and time / samples to target, a
config that does not reach it within its budget is `not reached` in the record, the report's JSON, its table and
Optuna (a complete trial with its values)."""

from __future__ import annotations

import json

import optuna
import pytest

from tests.helpers.studies import load_trials
from tests.helpers.userworkloads import PLANTED_STEPS, write
from tuner.cli import main

# PLANTED_STEPS's val_loss is 1000 / (1 + 8 x optimizer steps): batch 8 meets 10 at 104 samples, batch 32 only
# at 416, past its 256-sample budget.
SPACE = """
description: batch size only
defaults: {budget: {samples: 256}, trials: 3}
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: categorical, choices: [8, 32]}
  precision: fp32
  num_workers: 0
trial: {measure: {warmup_steps: 1, windows: 2, window_min_seconds: 0, ceiling_seconds: 0}}
"""


@pytest.mark.ray
def test_a_study_with_a_target_records_time_to_it_and_not_reached(ray_session, tmp_path, capsys):
    work = write(tmp_path / "proj", PLANTED_STEPS)
    space = tmp_path / "bs.yaml"
    space.write_text(SPACE)
    reports = tmp_path / "reports"
    code = main(["search", "--space", str(space), "--workload", f"{work}:make", "--study", "tt", "--trials", "3",
                 "--target", "10", "--eval-every-samples", "32", "--confirm", "0", "--no-probe",
                 "--reports-dir", str(reports)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "target: val_loss <= 10 (--target), evaluated every 32 samples; reached by" in out
    meta = json.loads((reports / "tt" / "study.json").read_text())
    assert meta["target"] == {"metric": "val_loss", "direction": "minimize", "value": 10.0,
                              "eval_every_samples": 32, "source": "--target"}
    records = load_trials(reports / "tt")
    by_batch = {r["params"]["batch_size"]: r for r in records}
    assert set(by_batch) == {8, 32}, [r["params"] for r in records]
    small, big = by_batch[8], by_batch[32]
    assert small["state"] == "complete" and 104 <= small["samples_to_target"] < 256
    assert small["time_to_target"] > 0 and small["quality_curve"][-1][2] <= 10
    assert big["state"] == "not reached" and big["time_to_target"] is None and big["error"] is None
    assert big["quality_curve"] and all(q > 10 for _, _, q in big["quality_curve"])

    # Optuna was told a not-reached trial as a complete trial with its objective values, never a failure
    trials = optuna.load_study(study_name="tt", storage=f"sqlite:///{reports / 'tt' / 'study.db'}").trials
    told = {t.number: t for t in trials}
    nr = told[big["trial"]]
    assert nr.state == optuna.trial.TrialState.COMPLETE and nr.values and nr.constraints["failed"] <= 0

    assert main(["report", "tt", "--reports-dir", str(reports), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"]["value"] == 10.0
    states = {t["trial"]: t["state"] for t in doc["trials"]}
    assert states[big["trial"]] == "not reached" and states[small["trial"]] == "complete"
    assert {t["trial"]: t.get("samples_to_target") for t in doc["trials"]}[small["trial"]] == \
        small["samples_to_target"]
    assert main(["report", "tt", "--reports-dir", str(reports)]) == 0
    table = capsys.readouterr().out
    assert "not reached" in table and "target: val_loss <= 10" in table
    assert "to target" in (reports / "tt" / "trials.csv").read_text().splitlines()[0].replace("_", " ")


def _plan(tmp_path, space_text, **options):
    from tuner.search._options import SearchOptions, check_plan, plan_search

    work = write(tmp_path / "proj", PLANTED_STEPS)
    space = tmp_path / "bs.yaml"
    space.write_text(space_text)
    plan = plan_search(SearchOptions(space=str(space), workload=f"{work}:make", reports_dir=tmp_path / "r",
                                     **options))
    check_plan(plan)
    return plan


def test_a_spaces_target_is_the_studys_with_k_from_the_baselines_effective_batch(tmp_path):
    plan = _plan(tmp_path, SPACE + "target: 12.5\n")
    t = plan.target
    assert (t.metric, t.direction, t.value, t.source) == ("val_loss", "minimize", 12.5, "space")
    assert t.eval_every_samples == 25 * 64  # 25 optimizer steps of the baseline's effective batch (Params' 64)
    given = _plan(tmp_path, SPACE + "target: 12.5\n", target=3.0, eval_every_samples=100).target
    assert (given.value, given.source, given.eval_every_samples) == (3.0, "--target", 100)  # the option wins


def test_eval_every_samples_without_a_target_is_one_clear_error(tmp_path):
    from tuner.errors import ConfigError

    with pytest.raises(ConfigError, match="--eval-every-samples needs a target: give --target VALUE"):
        _plan(tmp_path, SPACE, eval_every_samples=100)


def test_resume_keeps_the_saved_target_and_refuses_another(tmp_path):
    from types import SimpleNamespace

    from tuner.errors import StudyError
    from tuner.search._target import study_target
    from tuner.study import StudyMeta

    saved = {"metric": "val_loss", "direction": "minimize", "value": 10.0, "eval_every_samples": 32,
             "source": "--target"}
    meta = StudyMeta.model_validate({"name": "tt", "target": saved})  # study.json as written, read back

    def plan(**given):
        opts = SimpleNamespace(**{"target": None, "eval_every_samples": None, **given})
        return SimpleNamespace(options=opts, meta=meta, resume=True, study="tt")

    assert study_target(plan(), None, None).model_dump() == saved
    assert study_target(plan(target=10.0), None, None).value == 10.0  # the same one given again
    with pytest.raises(StudyError, match="was started with --target 10; resume without --target"):
        study_target(plan(target=5.0), None, None)
