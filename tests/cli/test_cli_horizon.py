"""`tuner export --horizon` through the real entry point (issue 51, item 6): what it costs said first, each run on
stderr, the pick and the baseline interleaved, the check recorded in the study folder and shown by `tuner report`
and `tuner export`; bad input one line, exit 2, nothing on disk changed. Planted runs (their quality curves) here;
tests/cli/test_cli_horizon_run.py trains a tiny real one."""

import json
from pathlib import Path

import pytest

from tests.cli.test_cli_report import assert_one_line_error, run
from tests.helpers.studies import disk_state
from tuner.study import HORIZON_FILE, StudyFolder, TrialResult

TARGET = {"metric": "fid", "direction": "minimize", "value": 30.0, "eval_every_samples": 1600, "source": "baseline",
          "evaluations": [[3200, 8.0, 31.0], [4800, 12.0, 29.0], [6400, 16.0, 30.0]], "cap_seconds": 36.0}


def target_study(make_study, with_target=True):
    """The planted GAN study with a target, trial 0 its baseline (12 s to target) and trial 2, the knee the export
    picks, 3x sooner (4 s), in single readings."""
    from tuner.analysis import read_records
    from tests.helpers.records import write_record

    reports = make_study()
    folder = StudyFolder(reports / "gan-demo")
    update = {"baseline": {"trial": 0, "params": {}}, **({"target": TARGET} if with_target else {})}
    folder.write_meta(folder.read_meta().model_copy(update=update))
    if with_target:
        for rec in read_records(folder):
            if rec.trial in (0, 2):
                rec.metrics.update(time_to_target=12.0 if rec.trial == 0 else 4.0, samples_to_target=3200)
                write_record(folder, rec)
    return reports, folder


def planted(monkeypatch, speed_up=2.0):
    """Runs whose fid falls 1 a second from 60 (the baseline: batch 64) or `speed_up` times as fast (the pick),
    an evaluation every 5 s of training; each seed a little apart. Records the order they ran in. Planted in
    place of the one function that trains a run in its own process (tuner.report.horizon.train_apart: a tiny
    real check's runs do, tests/cli/test_cli_horizon_run.py)."""
    ran = []

    def run_trial(cfg, cache_dir, servers=None):
        side = "baseline" if cfg.params.batch_size == 64 else "pick"
        ran.append((side, cfg.params.seed, cfg.budget.seconds, cfg.target.value))
        rate = (1.0 if side == "baseline" else speed_up) * (1 + 0.02 * (cfg.params.seed % 3))
        curve = [[1000.0 * t, float(t), max(10.0, 60.0 - rate * t)] for t in range(5, 61, 5)]
        return TrialResult(state="not reached", throughput=500.0, quality_curve=curve)

    monkeypatch.setattr("tuner.report.horizon.train_apart", run_trial)
    return ran


def test_the_horizon_check_runs_interleaved_says_its_cost_and_is_recorded_and_shown(make_study, capsys,
                                                                                   monkeypatch):
    reports, folder = target_study(make_study)
    ran = planted(monkeypatch)
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--horizon", "1m")
    assert code == 0, err
    # pick, baseline, pick, baseline ...: 3 seeds each by default, the same seed for both sides of a pair,
    # each trained the whole horizon with the study's metric and K but no value (set after the runs)
    assert [s for s, *_ in ran] == ["pick", "baseline"] * 3
    assert [seed for _, seed, *_ in ran][::2] == [seed for _, seed, *_ in ran][1::2]
    assert {(b, v) for *_, b, v in ran} == {(60.0, None)}
    assert "horizon: will run 6 runs (3 seeds each of the pick and the baseline, interleaved) x 60 s = 6 min of " \
        "training" in err
    assert err.index("will run") < err.index("horizon: run 1/6: the pick (trial 2)")
    assert "horizon: run 6/6 trained to the horizon, fid 10 at the end" in err
    check = json.loads((folder.path / HORIZON_FILE).read_text())
    # the baseline settles about 5 s of fid short of 60 - 50 = 10 at 60 s: the target is what its runs settle
    # at; the pick, twice as fast, reaches it about 2x sooner: below the study's 3x (single readings)
    assert check["target_source"] == "baseline at the horizon" and check["pick"] == 2 and check["baseline"] == 0
    assert 1.5 < check["ratio"] < 2.5 and check["study_ratio"] == pytest.approx(3.0)
    assert check["word"] == "shrinks" and len(check["runs"]) == 6
    line = next(x for x in out.splitlines() if x.startswith("horizon check:"))
    assert "the speed-up shrinks at 60 s: the pick reaches fid <= " in line and "against 3.00x in the study" in line
    assert "horizon check: the speed-up shrinks" in (folder.path / "best.yaml").read_text()

    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports)
    assert code == 0 and line in out
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports, "--format", "json")
    assert json.loads(out)["horizon"]["word"] == "shrinks"
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports)  # no --horizon: shown as recorded
    assert code == 0 and line in out and len(ran) == 6
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--format", "json")
    assert json.loads(out)["horizon"]["ratio"] == pytest.approx(check["ratio"])


def test_a_given_target_and_seeds(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study)
    ran = planted(monkeypatch, speed_up=0.8)  # the pick learns slower per second at length
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--horizon", "60000samples",
                         "--horizon-seeds", "2", "--target", "35")
    assert code == 0, err
    assert len(ran) == 4 and "4 runs (2 seeds each" in err and "240,000 samples of training" in err
    check = json.loads((folder.path / HORIZON_FILE).read_text())
    assert check["target"] == 35.0 and check["target_source"] == "--target" and check["horizon"] == {"samples": 60000}
    assert check["word"] == "reverses" and check["ratio"] < 1


@pytest.mark.parametrize("args, needles", [
    (["--horizon", "3s"], ["--horizon 3 s is no longer than the study's trials (5 s)"]),
    (["--horizon", "2parsecs"], ["unknown unit 'parsecs'", "50000samples"]),
    (["--horizon", "120"], ["--horizon '120': give a number and its unit"]),
    (["--target", "20"], ["--target sets the quality --horizon reads time to: give --horizon too"]),
    (["--horizon", "2m", "--trial", "0"], ["the pick is the baseline (trial 0)"]),
])
def test_bad_input_is_one_line_exit_2_and_nothing_on_disk_changes(make_study, capsys, monkeypatch, args, needles):
    reports, folder = target_study(make_study)
    ran = planted(monkeypatch)
    before = disk_state(reports)
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, *args)
    assert_one_line_error(code, err, *needles)
    assert disk_state(reports) == before and not ran


def test_a_study_without_a_target_is_refused(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study, with_target=False)
    ran = planted(monkeypatch)
    before = disk_state(reports)
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--horizon", "2m")
    assert_one_line_error(code, err, "has no target", "--target baseline")
    assert disk_state(reports) == before and not ran


def test_the_record_is_one_of_the_study_s_own_files(make_study, capsys, monkeypatch):
    """An export never writes over horizon.json (tuner.study.study_record knows it)."""
    reports, folder = target_study(make_study)
    planted(monkeypatch)
    assert run(capsys, "export", "gan-demo", "--reports-dir", reports, "--horizon", "1m")[0] == 0
    before = disk_state(reports)
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--out", folder.path / HORIZON_FILE,
                         "--force")
    assert_one_line_error(code, err, "horizon.json of the study")
    assert disk_state(reports) == before


@pytest.mark.parametrize("text, budget", [("120s", {"seconds": 120.0}), ("2m", {"seconds": 120.0}),
                                          ("1.5h", {"seconds": 5400.0}), ("50000samples", {"samples": 50000}),
                                          ("2 min", {"seconds": 120.0})])
def test_the_horizon_s_units_are_a_budget_s(text, budget):
    from tuner.report.horizon import parse_horizon

    assert parse_horizon(text).model_dump(exclude_none=True) == budget


def test_a_run_that_fails_records_nothing_and_exits_3(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study)
    monkeypatch.setattr("tuner.report.horizon.train_apart",
                        lambda cfg, cache_dir, servers=None: TrialResult(state="oom", error="OutOfMemoryError: boom"))
    code, out, err = run(capsys, "export", "gan-demo", "--reports-dir", reports, "--horizon", "1m")
    assert code == 3 and "horizon: a run of the pick (trial 2) ended oom: OutOfMemoryError: boom" in err
    assert not (folder.path / HORIZON_FILE).exists()


def test_each_run_trains_apart_under_its_own_sides_environment(monkeypatch):
    """A run's process gets its side's trial environment before torch loads there: the pick's wait policy (its
    knob) for the pick, and for the baseline, which set none, the variable unset, though this process holds the
    pick's (`export --verify` sets it here). The run's pid comes back with its curve."""
    from tuner.config import Params, TrialConfig
    from tuner.report.horizon import train_apart

    seen = []
    monkeypatch.setattr("tuner.search.run_apart", lambda fn, args, env=None, *, servers=None: (
        seen.append(env), (0, {"state": "complete", "error": None, "quality_curve": [], "pid": 4242}))[1])
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    pick = TrialConfig(params=Params(omp_wait_policy="ACTIVE"), env={"OMP_NUM_THREADS": "2"})
    read = train_apart(pick, Path("cache"))
    train_apart(TrialConfig(env={"OMP_NUM_THREADS": "2"}), Path("cache"))
    train_apart(TrialConfig(params=Params(malloc="retain")), Path("cache"))
    unset = {"MALLOC_MMAP_THRESHOLD_": None, "MALLOC_TRIM_THRESHOLD_": None}  # malloc's, at its default
    assert seen == [{"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "2", **unset},
                    {"OMP_WAIT_POLICY": None, "OMP_NUM_THREADS": "2", **unset},
                    {"OMP_WAIT_POLICY": None, "MALLOC_MMAP_THRESHOLD_": "33554432",
                     "MALLOC_TRIM_THRESHOLD_": "268435456"}]
    assert read.pid == 4242 and read.state == "complete"
    monkeypatch.setattr("tuner.search.run_apart", lambda fn, args, env=None, *, servers=None: (-9, None))
    died = train_apart(pick, Path("cache"))
    assert died.state == "error" and "ended with signal 9 before it reported" in died.error
