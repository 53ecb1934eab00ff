"""`tuner search --horizon` (issue 51, item 6: "a study option too"): after the confirmation the study runs the
horizon check `tuner export --horizon` runs, on its pick, its cost said first, recorded in horizon.json and its
line in the study's summary; a study with no pick or no target says in one line why it skipped it; a bad value is
one line, exit 2, before any work; study.json keeps the option, so --resume runs it too.

The study itself is planted (run_search returns a planted study's summary, as tests/cli/test_cli_search.py does)
and the check's runs are tests/cli/test_cli_horizon.py's planted quality curves; one test runs a real two-trial
study on a fake engine to show study.json keeps the option through --resume."""

import json

import pytest

from tests.cli.test_cli_horizon import planted, target_study
from tests.cli.test_cli_report import assert_one_line_error, run
from tests.helpers.studies import disk_state
from tuner.study import HORIZON_FILE, StudyFolder, StudyMeta

HORIZON = {"budget": {"seconds": 60.0}, "seeds": 2}


def searched(monkeypatch, folder: StudyFolder, horizon=HORIZON):
    """`tuner search` whose run_search returns the planted study in `folder`, its study.json holding `horizon`
    as run_search would have written it from --horizon; returns the options the CLI made."""
    import tuner.search
    from tuner.analysis import Study
    from tuner.search._runner import SearchSummary

    folder.write_meta(folder.read_meta().model_copy(update={"horizon": horizon}))
    seen = []

    def run_search(opts, console=None, view=None):
        seen.append(opts)
        study = Study.load(folder)
        return SearchSummary(study, ran=len(study.records), total=len(study.records), seconds=1.0)

    monkeypatch.setattr(tuner.search, "run_search", run_search)
    return seen


def test_the_study_runs_the_horizon_check_on_its_pick_says_its_cost_and_records_it(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study)
    ran = planted(monkeypatch)
    seen = searched(monkeypatch, folder)
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--study", "gan-demo", "--reports-dir", reports,
                         "--horizon", "1m", "--horizon-seeds", "2")
    assert code == 0, err
    assert seen[0].horizon == "1m" and seen[0].horizon_seeds == 2  # the options reach run_search's plan
    # the knee (trial 2) and the baseline (trial 0), interleaved, 2 seeds each, each trained the whole minute
    assert [s for s, *_ in ran] == ["pick", "baseline"] * 2 and {b for *_, b, _ in ran} == {60.0}
    assert "horizon: will run 4 runs (2 seeds each of the pick and the baseline, interleaved) x 60 s = 4 min" in err
    assert err.index("horizon: will run") < err.index("horizon: run 1/4: the pick (trial 2)")
    check = json.loads((folder.path / HORIZON_FILE).read_text())
    assert check["pick"] == 2 and check["baseline"] == 0 and check["word"] == "shrinks" and len(check["runs"]) == 4
    lines = out.splitlines()
    line = next(x for x in lines if x.startswith("horizon check:"))
    assert "the speed-up shrinks at 60 s" in line
    assert lines.index(line) > next(i for i, x in enumerate(lines) if x.startswith("pick:"))  # in the summary
    # exactly as export records it: report shows the same line
    code, out, err = run(capsys, "report", "gan-demo", "--reports-dir", reports)
    assert code == 0 and line in out
    # and the HTML report shows the line the text report shows
    from html import unescape

    from tuner.analysis import open_study
    from tuner.report.html import render_html

    page = unescape(render_html(open_study(reports, "gan-demo")))
    assert f'<p id="horizon-check"><b>Horizon:</b> {line}.</p>' in page


def test_the_html_report_of_a_study_without_a_check_has_no_horizon_line(make_study):
    from tuner.analysis import open_study
    from tuner.report.html import render_html

    reports, folder = target_study(make_study)
    assert 'id="horizon-check"' not in render_html(open_study(reports, "gan-demo"))


def test_json_carries_the_check(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study)
    planted(monkeypatch)
    searched(monkeypatch, folder)
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--reports-dir", reports, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["horizon"]["word"] == "shrinks" and doc["horizon"]["pick"] == 2


def test_a_study_without_a_target_skips_it_in_one_line(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study, with_target=False)
    ran = planted(monkeypatch)
    searched(monkeypatch, folder)
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--reports-dir", reports)
    assert code == 0, err
    skipped = [x for x in out.splitlines() if x.startswith("horizon check")]
    assert len(skipped) == 1 and skipped[0].startswith("horizon check skipped: ") and "has no target" in skipped[0]
    assert not ran and not (folder.path / HORIZON_FILE).exists() and "will run" not in err


def test_a_study_without_a_pick_skips_it_in_one_line(make_study, capsys, monkeypatch):
    from tests.helpers.records import write_record
    from tuner.analysis import read_records

    reports, folder = target_study(make_study)
    for rec in read_records(folder):
        rec.state = "error"
        rec.error = "planted"
        write_record(folder, rec)
    ran = planted(monkeypatch)
    searched(monkeypatch, folder)
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--reports-dir", reports)
    assert code == 0, err
    skipped = [x for x in out.splitlines() if x.startswith("horizon check")]
    assert len(skipped) == 1 and skipped[0].startswith("horizon check skipped: no pick (")
    assert not ran and not (folder.path / HORIZON_FILE).exists()


def test_a_study_without_the_option_runs_no_check(make_study, capsys, monkeypatch):
    reports, folder = target_study(make_study)
    ran = planted(monkeypatch)
    searched(monkeypatch, folder, horizon=None)
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--reports-dir", reports)
    assert code == 0 and not ran and "horizon" not in out + err


def test_a_failed_run_of_the_check_is_the_summary_s_line_and_exit_3(make_study, capsys, monkeypatch):
    from tuner.study import TrialResult

    reports, folder = target_study(make_study)
    searched(monkeypatch, folder)
    monkeypatch.setattr("tuner.report.horizon.train_apart",
                        lambda cfg, cache_dir, servers=None: TrialResult(state="oom", error="OutOfMemoryError: boom"))
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--reports-dir", reports)
    assert code == 3 and "study gan-demo" in out
    assert "horizon check failed: horizon: a run of the pick (trial 2) ended oom" in out
    assert not (folder.path / HORIZON_FILE).exists()


@pytest.mark.parametrize("args, needle", [
    (["--horizon", "2parsecs"], "unknown unit 'parsecs'"),
    (["--horizon", "120"], "--horizon '120': give a number and its unit"),
    (["--horizon", "2m", "--horizon-seeds", "0"], "--horizon-seeds 0: at least 1"),
    (["--horizon-seeds", "2"], "--horizon-seeds sets the seeds of --horizon's check: give --horizon too"),
    (["--horizon", "3s", "--budget-seconds", "5"], "--horizon 3 s is no longer than the study's trials (5 s)"),
    (["--horizon", "100samples", "--budget-samples", "640"], "--horizon 100 samples is no longer"),
])
def test_a_bad_value_is_one_line_exit_2_before_any_work(tmp_path, capsys, args, needle):
    reports = tmp_path / "r"
    before = disk_state(tmp_path)
    code, out, err = run(capsys, "search", "--space", "amp_loader", "--reports-dir", reports, *args)
    assert_one_line_error(code, err, needle)
    assert disk_state(tmp_path) == before and not reports.exists()


def test_resume_keeps_the_option_and_a_given_one_replaces_it():
    """What --resume plans (tuner.search._plan.plan_horizon_option, over study.json's): the saved check stands
    unless --horizon (or --horizon-seeds) is given again; a study without one asks for none."""
    from tuner.config import Budget
    from tuner.search import SearchOptions
    from tuner.search._plan import plan_horizon_option

    trials = Budget(seconds=5)
    assert plan_horizon_option(SearchOptions(), None, trials) is None
    assert plan_horizon_option(SearchOptions(), HORIZON, trials) == HORIZON
    assert plan_horizon_option(SearchOptions(horizon_seeds=4), HORIZON, trials) == {**HORIZON, "seeds": 4}
    assert plan_horizon_option(SearchOptions(horizon="90000samples"), HORIZON, trials) == \
        {"budget": {"samples": 90000}, "seeds": 2}
    assert plan_horizon_option(SearchOptions(horizon="2m"), None, trials) == {"budget": {"seconds": 120.0},
                                                                              "seeds": 3}


def test_study_json_keeps_the_option_through_resume(tmp_path, ray_session, trial_engine):
    """A real (fake-engine) study: --horizon lands in study.json with its seeds; a --resume without it keeps it,
    so the resumed study's check is the one asked at the start."""
    from tests.helpers.fakeengine import fake_engine_study
    from tests.search.test_search_resume import _engine
    from tuner.search import SearchOptions, run_search

    fake_engine_study(tmp_path, trial_engine, _engine, trials=2, confirm=0, horizon="2000samples")
    meta = StudyMeta.model_validate_json((tmp_path / "fake" / "study.json").read_text())
    assert meta.horizon == {"budget": {"samples": 2000}, "seeds": 3}
    run_search(SearchOptions(study="fake", reports_dir=tmp_path, resume=True, trials=3, confirm=0, probe=False))
    meta = StudyMeta.model_validate_json((tmp_path / "fake" / "study.json").read_text())
    assert meta.horizon == {"budget": {"samples": 2000}, "seeds": 3} and len(meta.resumed) == 1
