"""A study keeps the budget's contract as `tuner train` does: every trial (the baseline, the sampled ones, the
confirmation re-runs) keeps the pre-flight's scoring estimate out of its training share, grown when its step is
slower than the pre-flight's; a budget the space chose that is too short for the step is raised (one line, kept
in study.json, used on --resume); one the user gave is refused. The pre-flight's figures are planted: no timing
is asserted."""

from __future__ import annotations

import sys

import pytest

from tests.helpers.studies import load_trials, read_meta
from tests.helpers.userworkloads import IMPORTS, data_source, evaluate_source, write
from tuner.cli import main
from tuner.study import StudyFolder

# The step sleeps 2 ms for its process's first 4 calls, then 20 ms (the machine got busy after the pre-flight,
# which runs in the driver; the trials run in Ray workers, each warmed by its own pre-flight first).
SLOWING = "\nimport time\n" + IMPORTS + '''
CALLS = [0]
''' + data_source(160) + '''

def loss(models, batch):
    CALLS[0] += 1
    time.sleep(0.002 if CALLS[0] <= 4 else 0.02)
    return F.cross_entropy(models["net"](batch[0]), batch[1])
''' + evaluate_source() + '''

def make():
    return tuner.Workload(models={"net": lambda: nn.Linear(4, 2)}, datasets=data, loss=loss, evaluate=evaluate,
                          quality=("val_loss", "min"))
'''

SPACE = """
description: batch size only, a step that slows after the pre-flight
defaults: {{workload: {workload}, budget: {{seconds: 0.5}}, trials: 2}}
objectives: [{{metric: throughput, direction: max}}, {{metric: quality}}]
params:
  batch_size: {{type: categorical, choices: [8, 16]}}
  precision: fp32
  num_workers: 0
trial: {{measure: {{warmup_steps: 1, warmup_max_steps: 2, windows: 3, min_windows: 1, window_min_steps: 1,
                    window_min_seconds: 0.05, ceiling_seconds: 0}}}}
"""


@pytest.fixture
def planted_preflight(monkeypatch):
    """The pre-flight read a 1 ms step and estimated scoring at 1 s (its evaluate() still runs)."""
    preflight = sys.modules["tuner.train.preflight"]
    real_score = preflight._score_timed
    monkeypatch.setattr(preflight, "_train_steps", lambda *a, **k: 0.001)
    monkeypatch.setattr(preflight, "_score_timed", lambda *a, **k: (real_score(*a, **k)[0], 1.0))


def space_file(tmp_path):
    work = write(tmp_path / "proj", SLOWING, name="slowing.py")
    space = tmp_path / "slowing.yaml"
    space.write_text(SPACE.format(workload=f"{work}:make"))
    return space


@pytest.mark.ray
def test_every_trial_of_a_sized_study_keeps_a_grown_scoring_reserve(ray_session, tmp_path, capsys,
                                                                    planted_preflight):
    reports = tmp_path / "reports"
    code = main(["search", "--space", str(space_file(tmp_path)), "--study", "slowing", "--sampler", "random",
                 "--seed", "1", "--confirm", "1", "--repeats", "1", "--concurrency", "1", "--no-probe",
                 "--reports-dir", str(reports)])
    out, err = capsys.readouterr()
    assert code == 0, err
    # 1 warm-up step and a window at 1 ms, and 1 s of scoring: 1.05 s, a fifth more: 2 s instead of the space's 0.5
    assert "the space's 0.5 s budget is too short" in err and "each trial trains 2 s instead" in err
    assert "--budget-seconds" in err
    study_dir = reports / "slowing"
    meta = read_meta(study_dir)
    assert meta["budget"] == {"seconds": 2.0}
    assert meta["preflight"]["score_seconds"] == 1.0 and meta["preflight"]["sized"] == {"from": 0.5, "to": 2.0}
    records = load_trials(study_dir)
    assert len(records) == 2  # the baseline and one sampled trial
    folder = StudyFolder(study_dir)
    reruns = [r for rec in records for r in folder.reruns(rec["trial"])]
    assert reruns  # the confirmation ran
    # the budget the pre-flight sized is the one study.json keeps and every trial trained with
    assert [r["config"]["budget"] for r in records] == [meta["budget"]] * len(records)
    first, *later = sorted(records, key=lambda r: r["trial"])
    assert first["state"] == "complete", first.get("error")
    # slower per sample than the pre-flight's 1 ms step: the 1 s estimate grows, up to 90% of the budget
    assert 1.0 < first["score_reserve_seconds"] <= 0.9 * 2.0
    # once a trial has scored (a few ms here), later trials and the re-runs keep 1.25x what scoring measured,
    # grown by their own pace, instead of the pre-flight's over-estimate
    measured = first["quality_seconds"]
    for r in later + [x.to_json() for x in reruns]:
        assert r["state"] == "complete", r.get("error")
        assert 1.25 * measured * 0.999 <= r["score_reserve_seconds"] < 1.0
    # --resume keeps the budget the study sized itself to (not the space's): the same study, nothing to re-plan
    from tuner.search._options import SearchOptions
    from tuner.search._plan import plan_search

    plan = plan_search(SearchOptions(study="slowing", resume=True, reports_dir=reports))
    assert plan.budget.seconds == 2.0 and plan.preflight.score_seconds == 1.0


CLUSTER_SPACE = """
description: batch size only, on a fake engine
defaults: {workload: cnn, dataset: synthetic, budget: {seconds: 2}, trials: 3}
objectives: [{metric: throughput, direction: max}, {metric: loss, direction: min}]
params:
  batch_size: {type: categorical, choices: [16, 32, 64]}
"""


def engine_scoring(cfg, *, score_reserve_s=None, **_):
    """Fake: its scoring measured 0.4 s; it records the scoring reserve the study gave it."""
    from tuner.study import TrialResult

    return TrialResult(state="complete", throughput=float(cfg.params.batch_size), loss=1.0, train_seconds=1.0,
                       quality_seconds=0.4, score_reserve_seconds=score_reserve_s)


@pytest.mark.ray
def test_a_cluster_study_keeps_the_learned_scoring_reserve_once_a_trial_has_scored(ray_session, tmp_path,
                                                                                   trial_engine):
    """`--address` runs no pre-flight on the trials' device, so the study has no scoring estimate: its first trial
    reserves nothing, and every later trial and re-run keeps 1.25x the scoring measured (0.4 s: 0.5 s)."""
    import ray.cloudpickle

    from tuner.search import SearchOptions, run_search

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trial_engine(engine_scoring)
    space = tmp_path / "fake.yaml"
    space.write_text(CLUSTER_SPACE)
    summary = run_search(SearchOptions(space=str(space), reports_dir=tmp_path, probe=False, confirm=1, repeats=1,
                                       concurrency=1, seed=1, address="auto"))  # Ray is up: joins nothing
    assert read_meta(tmp_path / "fake").get("preflight") is None  # no estimate
    first, *later = sorted(summary.study.records, key=lambda r: r.trial)
    assert first.get("score_reserve_seconds") is None
    reruns = [r for rec in summary.study.records for r in StudyFolder(tmp_path / "fake").reruns(rec.trial)]
    assert later and reruns
    assert all(r.get("score_reserve_seconds") == pytest.approx(0.5) for r in later + reruns)
