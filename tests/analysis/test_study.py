"""Reading a study back: lookup errors name what exists; trials sort by Pareto rank; grid paths resolve."""

import pytest

from tuner.errors import StudyError
from tuner.analysis import bound_label, open_study
from tests.helpers.records import write_csv


def test_open_study_ranks_and_sorts(make_study):
    s = open_study(make_study(), "gan-demo")
    assert [r.trial for r in s.front()] == [1, 2, 4]
    order = [r.trial for r in s.sorted_records()]
    assert order[:3] == [1, 2, 4]  # front, fastest first
    assert order[3:5] == [0, 5]  # rank 1
    assert order[5:] == [3, 6, 7]  # failures last, by trial number
    assert s.quality.metric == "fid"


def test_unknown_study_lists_the_known_ones(make_study):
    reports = make_study("a")
    make_study("b")
    with pytest.raises(StudyError, match=r"no study 'x' in .*reports/; known: a, b"):
        open_study(reports, "x")


def test_unknown_study_in_an_empty_folder(tmp_path):
    with pytest.raises(StudyError, match="no study 'x'.*no studies"):
        open_study(tmp_path / "nowhere", "x")


def test_unknown_trial_names_the_known_range(make_study):
    s = open_study(make_study(), "gan-demo")
    with pytest.raises(StudyError, match=r"no trial 42 in study 'gan-demo'; its trials are 0-7"):
        s.trial(42)
    s.records = [r for r in s.records if r.trial not in (3, 4)]
    with pytest.raises(StudyError, match=r"its trials are 0-2, 5-7"):
        s.trial(3)


def test_no_complete_trial(make_study):
    s = open_study(make_study(kind="failed"), "gan-demo")
    with pytest.raises(StudyError, match=r"no complete trial .*1 diverged, 1 error, 1 oom"):
        s.require_complete()


def test_sample_grid_relative_or_absolute(make_study):
    s = open_study(make_study(), "gan-demo")
    rel, absolute = s.sample_grid(s.trial(0)), s.sample_grid(s.trial(1))
    assert rel == s.dir / "trials/0000/samples.png" and rel.is_file()
    assert absolute.is_absolute() and absolute.is_file()
    assert s.sample_grid(s.trial(4)) is None


@pytest.mark.parametrize("wait,label", [(0.45, "input-bound"), (0.2, "mixed"), (0.05, "compute-bound"),
                                        (None, ""), (float("nan"), "")])
def test_bound_label(wait, label):
    assert bound_label(wait) == label


def test_a_copy_of_a_trial_folder_is_not_read_as_a_trial_and_is_named(make_study):
    """A user's backup `trials/0000.bak/` (and any other name the study does not write) is never a second trial 0:
    its figures would join the table, the noise floor and the verdict; the study names it instead."""
    import json
    import shutil

    reports = make_study()
    trials = reports / "gan-demo" / "trials"
    shutil.copytree(trials / "0000", trials / "0000.bak")
    backup = trials / "0000.bak" / "result.json"
    backup.write_text(json.dumps({**json.loads(backup.read_text()), "throughput": 5000.0}))
    shutil.copytree(trials / "0002", trials / "00002")  # digits, but not the study's naming (0002)
    (trials / "notes.txt").write_text("mine")
    s = open_study(reports, "gan-demo")
    assert [r.trial for r in s.records] == list(range(8))
    assert s.trial(0).throughput == 400.0
    assert [p.name for p in s.strays] == ["0000.bak", "00002", "notes.txt"]
    assert "0000.bak/" in s.strays_note() and "notes.txt" in s.strays_note()
    write_csv(s.folder)
    rows = (reports / "gan-demo" / "trials.csv").read_text().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == [str(n) for n in range(8)]


def test_a_result_file_in_another_trials_folder_is_refused_with_its_name(make_study):
    """trials/0000/result.json holding trial 1's record (a restore gone wrong) would give two 'trial 1' rows, one
    trial's params with the other's figures: refused, naming the file."""
    reports = make_study()
    trials = reports / "gan-demo" / "trials"
    (trials / "0000" / "result.json").write_bytes((trials / "0001" / "result.json").read_bytes())
    with pytest.raises(StudyError, match=r"trials/0000/result\.json: trial: 1, but the file is in trial 0's folder"):
        open_study(reports, "gan-demo")


def test_a_study_given_as_a_path_suggests_only_a_reports_dir_that_holds_it(make_study, tmp_path, monkeypatch):
    """`tuner report reports/gan-demo` (the default --reports-dir is reports): the study is ./reports/gan-demo, so
    that is the --reports-dir to suggest, never reports/reports (which does not exist); a path that holds no study
    gets no --reports-dir suggested."""
    from pathlib import Path

    reports = make_study()
    monkeypatch.chdir(reports.parent)
    with pytest.raises(StudyError) as err:
        open_study(Path("reports"), "reports/gan-demo")
    assert f"give the study's name and the folder that holds it: gan-demo --reports-dir {reports}" in str(err.value)
    assert "reports/reports" not in str(err.value)
    with pytest.raises(StudyError) as err:
        open_study(Path("reports"), "../elsewhere/gan-demo")
    assert str(err.value).endswith(f"give the study's name, a folder in --reports-dir (there is no study at "
                                   f"{reports.parent / 'elsewhere' / 'gan-demo'})")


@pytest.mark.parametrize(("key", "value", "named"), [
    ("baseline", {"trial": "zero", "params": {}}, "baseline.trial"),
    ("baseline", {"trial": 0, "params": 5}, "baseline.params"),
    ("scheduler", {"name": "asha", "eta": 3, "rungs": "x"}, "scheduler.rungs"),
    ("budget", {"seconds": "long"}, "budget.seconds"),
    ("resources", {"asked": {"concurrency": "many"}}, "resources.asked.concurrency"),
])
def test_a_study_json_with_a_wrong_type_is_one_line_naming_the_key_for_report_and_export(make_study, capsys, key,
                                                                                          value, named):
    """`baseline.trial: "zero"` made report and export crash (int('zero'): internal error, exit 1)."""
    import json

    from tuner.cli import main

    reports = make_study()
    meta_path = reports / "gan-demo" / "study.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, key: value}))
    before = sorted((p, p.read_bytes()) for p in (reports / "gan-demo").rglob("*") if p.is_file())
    for command in (["report", "gan-demo", "--format", "json"], ["export", "gan-demo"]):
        code = main([*command, "--reports-dir", str(reports)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"tuner: error: {meta_path}: {named}: "), err
        assert len(err.strip().splitlines()) == 1
    assert sorted((p, p.read_bytes()) for p in (reports / "gan-demo").rglob("*") if p.is_file()) == before


def test_a_confirmed_trials_time_to_target_is_the_export_headers_interval_not_the_pooled_one(make_study):
    """Issue 34: a study with a target, confirmed: each trial's confirmed time_to_target is time_to_target over its
    re-runs (the search's selected reading left out, issue 51; the export header's function, its not-reached runs counted at the target's cap), not
    re-pooled with the throughput-style noise, with its one-run interval (rerun_low/high: where one
    `--until-target` re-run reads, as throughput has); a trial that never reached the target (nor did its re-runs)
    has none."""
    from tests.helpers.studies import target_study
    from tuner.analysis import time_to_target

    s = open_study(target_study(make_study()).parent, "gan-demo")
    for n in (0, 2):
        fig = s.trial(n).confirmed.figures["time_to_target"]
        want = time_to_target(s.folder.reruns(n), cap=s.target.cap_seconds)
        assert (fig.centre, fig.low, fig.high) == (want.interval.centre, want.interval.low, want.interval.high)
        assert (fig.rerun_low, fig.rerun_high) == (want.prediction.low, want.prediction.high)
        assert fig.rerun_low < fig.low and fig.rerun_high > fig.high and fig.at_least == (n == 2)
    two = s.trial(2).confirmed.figures["time_to_target"]
    assert two.not_reached == 1 and two.centre == pytest.approx(576 ** (1 / 3))  # 5, 3.2 and the 36 s cap
    assert "time_to_target" not in s.trial(1).confirmed.figures
    assert s.trial(2).confirmed.figures["throughput"].low is not None  # the other figures still pooled
