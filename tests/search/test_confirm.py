"""The confirmation phase: which trials, in which order, recorded where, and resumed after a kill."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

from studies import load_trials
from tuner.search import SearchOptions, run_search
from tuner.search.confirm import plan_reruns, schedule
from tuner.study import Objective, Study, StudyFolder, StudyMeta, TrialRecord, TrialResult

OBJ = [Objective(metric="throughput", direction="max"), Objective(metric="fid", direction="min")]

SPACE = """
description: batch size and beta1 on a fake engine
defaults: {workload: cnn, dataset: synthetic, budget: {samples: 64}, trials: 6}
objectives: [{metric: throughput, direction: max}, {metric: loss, direction: min}]
params:
  batch_size: {type: categorical, choices: [16, 32, 64]}
  beta1: {type: float, low: 0.1, high: 0.9}
"""


def engine_logged(cfg, *, cache_dir, out_dir=None, device=None, wall_limit_s=None, on_window=None):
    """Fast and fake: throughput from the batch size, loss from beta1; every call appended to calls.log."""
    with open(Path(out_dir).parents[3 if Path(out_dir).parent.name == "confirm" else 1] / "calls.log", "a") as f:
        f.write(f"{out_dir}\n")
    p = cfg.params
    return TrialResult(state="complete", throughput=float(p.batch_size) * 10, loss=1.0 - p.beta1, train_seconds=0.01)


def _ship() -> None:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_which_trials_are_confirmed(tmp_path):
    folder = StudyFolder(tmp_path / "s")
    folder.write_meta(StudyMeta(name="s", objectives=OBJ, baseline={"trial": 0}))
    for n, (thr, fid) in enumerate([(100, 50), (300, 40), (220, 20), (150, 10), (250, 30), (120, 60)]):
        folder.write_record(TrialRecord(trial=n, state="complete", metrics={"throughput": thr, "fid": fid}))
    s = Study.load(folder)
    # front: 1 (fastest), 4, 2 (knee), 3 (best fid); the knee first, then fastest, then best quality; + baseline
    assert plan_reruns(s, 3) == [2, 1, 3, 0]
    assert plan_reruns(s, 1) == [2, 0]
    assert plan_reruns(s, 0) == []


def test_rounds_are_interleaved_and_rotate_and_skip_what_is_recorded():
    assert schedule([5, 7, 0], 3, {}) == [(5, 0), (7, 0), (0, 0), (7, 1), (0, 1), (5, 1), (0, 2), (5, 2), (7, 2)]
    assert schedule([5, 7, 0], 2, {7: {0}, 5: {0, 1}}) == [(0, 0), (7, 1), (0, 1)]


@pytest.mark.ray
def test_a_study_confirms_its_front_interleaved_and_records_every_rerun(ray_session, tmp_path):
    _ship()
    space = tmp_path / "fake.yaml"
    space.write_text(SPACE)
    summary = run_search(SearchOptions(space=str(space), reports_dir=tmp_path, engine=engine_logged, confirm=2,
                                       repeats=2, seed=1))
    study = summary.study
    confirmed = [r.trial for r in study.records if r.confirmed is not None]
    planned = plan_reruns(study, 2)
    assert sorted(confirmed) == sorted(planned) and 0 in planned
    calls = (tmp_path / "fake" / "calls.log").read_text().split()
    reruns = [(int(Path(c).parent.parent.name), int(Path(c).name)) for c in calls if "/confirm/" in c]
    assert reruns == schedule(planned, 2, {})  # the order the trials were re-run in: round-robin, rotated
    for n in planned:
        assert [r.repeat for r in study.folder.reruns(n)] == [0, 1]
    ostudy = optuna.load_study(study_name="fake", storage=f"sqlite:///{tmp_path / 'fake' / 'study.db'}")
    assert all(len(ostudy.user_attrs[f"confirm:{n}"]) == 2 for n in planned)  # in the Optuna study too
    assert study.meta.noise is not None and study.meta.confirm == {"trials": 2, "repeats": 2}
    assert summary.verdict is not None and summary.verdict.text.startswith(f"trial {summary.verdict.pick.trial}")
    # the search's own records are untouched: re-runs live beside them
    assert all(rec.get("confirmed") is None for rec in
               (__import__("json").loads(p.read_text()) for p in (tmp_path / "fake" / "trials").glob("*/result.json")))


@pytest.mark.ray
def test_confirm_zero_runs_no_confirmation(ray_session, tmp_path):
    _ship()
    space = tmp_path / "fake.yaml"
    space.write_text(SPACE.replace("trials: 6", "trials: 3"))
    summary = run_search(SearchOptions(space=str(space), reports_dir=tmp_path, engine=engine_logged, confirm=0))
    assert all(r.confirmed is None for r in summary.study.records) and summary.study.meta.noise is None
    assert len(load_trials(tmp_path / "fake")) == 3
