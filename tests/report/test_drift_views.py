"""The views rank, draw and show the figures the pick uses (issue 52): with the machine 2x faster in the second
confirmation round, the table ranked trial 3 (read 201 there, 1.0x the baseline read beside it) over the pick,
trial 2 (1.51x), and the baseline's 141.8 across rounds made trial 2 look 1.06x; with two objectives the front held
trial 3, which the drift-corrected figures dominate."""

import io
import json

import pytest
from rich.console import Console

from tuner.analysis import Study, decide
from tests.helpers.records import write_record, write_rerun
from tuner.report.html import render_html
from tuner.report.view import study_document, study_table
from tuner.study import Objective, Rerun, StudyFolder, StudyMeta, TrialRecord

# re-runs per trial: (throughput, fid, round); the machine reads 2x faster in round 1
RERUNS = {0: [(99.0, 40.0, 0), (101.0, 40.0, 0), (200.0, 40.0, 1), (202.0, 40.0, 1)],
          2: [(150.0, 30.0, 0), (152.0, 30.0, 0)],
          3: [(200.0, 35.0, 1), (202.0, 35.0, 1)]}
SEARCH = {0: 100.0, 2: 150.0, 3: 200.0}


def planted(tmp_path, quality):
    objectives = [Objective(metric="throughput", direction="maximize")]
    if quality:
        objectives.append(Objective(metric="fid", direction="minimize"))
    folder = StudyFolder(tmp_path / "drift")
    folder.write_meta(StudyMeta(name="drift", objectives=objectives, baseline={"trial": 0}))
    for n, thr in SEARCH.items():
        metrics = {"throughput": thr, **({"fid": RERUNS[n][0][1]} if quality else {})}
        write_record(folder, TrialRecord(trial=n, state="complete", metrics=metrics))
    for n, runs in RERUNS.items():
        for k, (thr, fid, round_) in enumerate(runs):
            metrics = {"throughput": thr, **({"fid": fid} if quality else {})}
            write_rerun(folder, n, Rerun(repeat=k, round=round_, state="complete", metrics=metrics))
    return Study.load(folder)


def table_text(study):
    buf = io.StringIO()
    Console(file=buf, width=400, force_terminal=False).print(study_table(study))
    return buf.getvalue()


def test_the_table_ranks_the_pick_first_and_shows_each_trial_against_the_baseline_read_beside_it(tmp_path):
    study = planted(tmp_path, quality=False)
    verdict = decide(study, "throughput")
    assert verdict.pick.trial == 2 and verdict.ratio.centre == pytest.approx(1.51, abs=0.01)
    assert study.sorted_records()[0].trial == 2 and study.rank(study.trial(2)) == 0
    assert study.rank(study.trial(3)) > 0  # 1.0x the baseline in its own round: no better than the baseline
    rows = {line.split("│")[2].strip().rstrip(" ✓"): line for line in table_text(study).splitlines()
            if line.count("│") > 3 and line.split("│")[2].strip()[:1].isdigit()}
    assert "1.51x the baseline" in rows["2"] and "1.00x the baseline" in rows["3"]
    assert "read 201" in rows["3"]  # the raw figure beside it
    assert "drift" in table_text(study).replace("\n", " ")  # the caption says which figure ranks


def test_the_json_and_the_html_carry_the_ranked_figures_and_say_which(tmp_path):
    study = planted(tmp_path, quality=False)
    doc = json.loads(json.dumps(study_document(study)))
    assert "drift" in doc["ranked_on"]["throughput"]
    ranked = {t["trial"]: t["ranked"]["throughput"] for t in doc["trials"]}
    assert ranked[2] / ranked[0] == pytest.approx(1.51, abs=0.01)
    assert ranked[3] / ranked[0] == pytest.approx(1.0, abs=0.01)
    assert [t["trial"] for t in doc["trials"]][0] == 2
    html = render_html(study)
    assert "ranked-on" in html and "1.51x the baseline" in html


def test_the_front_leaves_out_a_trial_the_drift_corrected_figures_dominate(tmp_path):
    study = planted(tmp_path, quality=True)
    assert sorted(r.trial for r in study.front()) == [2]  # 3: 1.0x the baseline at a worse fid than 2
    assert study_document(study)["front"] == [2]
    assert decide(study, "knee").pick.trial == 2


def test_a_study_read_in_one_phase_shows_its_figures_as_read(tmp_path):
    """No drift to correct: the table shows the figures read, with no ratio and no note."""
    folder = StudyFolder(tmp_path / "flat")
    folder.write_meta(StudyMeta(name="flat", objectives=[Objective(metric="throughput", direction="maximize")],
                                baseline={"trial": 0}))
    for n, thr in SEARCH.items():
        write_record(folder, TrialRecord(trial=n, state="complete", metrics={"throughput": thr}))
    study = Study.load(folder)
    assert not study.drift_adjusted("throughput")
    assert "the baseline;" not in table_text(study) and "drift" not in study.ranked_on()["throughput"]


def test_the_search_summary_s_front_shows_the_figures_it_is_ranked_by(tmp_path, capsys):
    from types import SimpleNamespace

    from tuner.cli.search import _print_summary

    study = planted(tmp_path, quality=True)
    summary = SimpleNamespace(name="drift", finished=3, total=3, as_many_as_fit=False, states={"complete": 3},
                              seconds=1.0, interrupted=False, verdict=decide(study), front=study.front(),
                              objectives=study.objectives, study=study, study_dir=study.dir, shares=None)
    _print_summary(summary)
    out = capsys.readouterr().out
    assert "1.51x the baseline" in out and "Pareto front (1 trial):" in out
