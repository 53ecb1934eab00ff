"""A study of a user's workload: an exception in their code is a trial state with their frames, the study goes
on and the sampler is told; a workload that cannot work is refused before Ray starts."""

from __future__ import annotations

import sys

import optuna
import pytest

from tests.helpers.studies import load_trials
from tuner.cli import main
from tests.helpers.userworkloads import GOOD, RAISES_AT_32, write

SPACE = """
description: batch size only
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 256}, trials: 4}
objectives: [{metric: throughput, direction: max}, {metric: quality}]
params:
  batch_size: {type: categorical, choices: [16, 32]}
  precision: fp32
  num_workers: 0
trial: {measure: {warmup_steps: 1, windows: 2}}
"""


@pytest.mark.ray
def test_an_exception_in_the_users_code_is_an_error_trial_with_their_frames(ray_session, tmp_path, capsys,
                                                                            space_search):
    work = write(tmp_path / "proj", RAISES_AT_32)
    # --no-probe: the sampler runs batch 32 (without batch statistics the probes would decide the split, and keep
    # the split whose reading did not raise)
    code, out, err, _, reports = space_search.run(SPACE, "--workload", f"{work}:make", "--trials", "4", "--study",
                                                  "bugs", "--confirm", "0", "--no-probe", name="bs.yaml")
    assert code == 0, err
    records = {r["trial"]: r for r in load_trials(reports / "bugs")}
    assert len(records) == 4
    bad = [r for r in records.values() if r["params"]["batch_size"] == 32]
    good = [r for r in records.values() if r["params"]["batch_size"] == 16]
    assert bad and good and all(r["state"] == "complete" for r in good)
    for r in bad:
        assert r["state"] == "error"
        assert r["error"].startswith("ValueError: shapes do not line up at 32 (at ") and str(work) in r["error"]
        tb = r["traceback"]
        assert f'File "{work}"' in tb and 'raise ValueError("shapes do not line up at 32")' in tb
        assert "tuner/train" not in tb and "frames in tuner" in tb  # tuner's own frames are folded
    trials = optuna.load_study(study_name="bugs", storage=f"sqlite:///{reports / 'bugs' / 'study.db'}").trials
    assert all((t.constraints["failed"] > 0) == (t.params["batch_size"] == 32) for t in trials)  # the sampler is told

    n = bad[0]["trial"]
    assert main(["report", "bugs", "--reports-dir", str(reports), "--trial", str(n)]) == 0
    shown = capsys.readouterr().out
    assert "shapes do not line up at 32" in shown and str(work) in shown and "raise ValueError" in shown


@pytest.mark.ray
def test_a_probe_that_raises_in_the_users_code_is_said_at_the_start_not_hidden(ray_session, tmp_path, space_search):
    """Without batch statistics the probes decide the split of the effective batch 64 and read every micro-batch:
    the user's bug at 32 raises in its probe. The study says so at its start, naming the error and the user's line,
    and the split is chosen among the micro-batches that ran (no trial runs 32)."""
    from tuner.study import ProbePlan

    work = write(tmp_path / "proj", RAISES_AT_32)
    code, out, err, _, reports = space_search.run(SPACE, "--workload", f"{work}:make", "--trials", "2", "--study",
                                                  "bugs", "--confirm", "0", name="bs.yaml")
    assert code == 0, err
    line = next(ln for ln in err.splitlines() if "batch 32: the probe's step raised" in ln)
    assert f"ValueError: shapes do not line up at 32 (at {work}:" in line and "chose without this batch size" in line
    plan = ProbePlan.model_validate_json((reports / "bugs" / "probes.json").read_text())
    raised = {c.batch_size: c.raised for c in plan.choices}
    assert raised[32].startswith("ValueError: shapes do not line up at 32") and raised[16] is None
    assert plan.split is not None and plan.split["batch_size"] != 32
    assert all(r["params"]["batch_size"] != 32 for r in load_trials(reports / "bugs"))


@pytest.mark.parametrize("body, needle", [
    ("import definitely_not_installed_xyz\n", "ModuleNotFoundError: No module named 'definitely_not_installed_xyz'"),
    (GOOD.replace('quality=("val_loss", "min")', 'quality=("val_acc", "max")'),
     "quality metric 'val_acc' is not among what evaluate() returns (val_loss)"),
    (GOOD.replace("def make(hidden=8):", "def make():").replace("hidden", "8"), "does not fit make()"),
])
def test_a_broken_workload_is_refused_before_ray_and_no_study_is_written(tmp_path, capsys, monkeypatch, body,
                                                                          needle):
    import tuner.search._ray_env as ray_env

    def no_ray(*a, **k):
        raise AssertionError("Ray was started for a broken workload")

    monkeypatch.setattr(ray_env, "start_local_ray", no_ray)
    work = write(tmp_path / "proj", body, "broken.py")
    sys.modules.pop("broken", None)
    space = tmp_path / "bs.yaml"
    space.write_text(SPACE)
    reports = tmp_path / "reports"
    argv = ["search", "--space", str(space), "--workload", f"{work}:make", "--reports-dir", str(reports)]
    if "does not fit" in needle:
        argv += ["--option", "hidden=16"]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert needle in err[0] and str(work) in err[0]
    assert not (reports / "bs").exists()


@pytest.mark.parametrize("flag", [["--dataset", "digits"], ["--option", "depth=3"]])
def test_a_dataset_or_option_the_factory_does_not_take_leaves_the_reports_folder_untouched(tmp_path, capsys, flag):
    """Refused before the study's folder is claimed: nothing in the reports folder moves, not even its own time
    (before, the study's folder was made, then removed)."""
    work = write(tmp_path / "proj", GOOD, "takes_hidden.py")
    sys.modules.pop("takes_hidden", None)
    space = tmp_path / "bs.yaml"
    space.write_text(SPACE)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "other").mkdir()  # another study's folder, as a user's reports/ has
    before = reports.stat().st_mtime_ns
    code = main(["search", "--space", str(space), "--workload", f"{work}:make", "--reports-dir", str(reports), *flag])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "does not fit make()" in err[0] and "it takes: hidden" in err[0], err
    assert [p.name for p in reports.iterdir()] == ["other"] and reports.stat().st_mtime_ns == before

