"""Issue 55 item 3: the summary says where a study's wall time went (probes, trials, confirmation, overhead), from
the study folder's timestamps; a planted study whose phases are known."""

import json
from datetime import datetime

from tuner.analysis import read_records, wall_shares
from tests.helpers.records import write_rerun
from tuner.study import Rerun, StudyFolder


def _planted(make_study):
    reports = make_study()
    folder = StudyFolder(reports / "gan-demo")
    records = read_records(folder)
    last_end = max(datetime.fromisoformat(r.ended).timestamp() for r in records)
    first_start = min(datetime.fromisoformat(r.started).timestamp() for r in records)
    ended = datetime.fromtimestamp(last_end + 64).astimezone().isoformat()
    write_rerun(folder, records[0].trial, Rerun.model_validate({"state": "complete", "throughput": 700.0,
                                                               "repeat": 0, "ended": ended}))
    folder.probes_path.write_text(json.dumps({"seconds": 10.0}))
    return reports, folder, first_start, last_end - first_start


def test_the_shares_come_from_the_folders_timestamps_and_the_rest_is_overhead(make_study):
    _, folder, since, span = _planted(make_study)
    shares = wall_shares(folder, wall=span + 64 + 10 + 26, since=since - 5)
    assert (shares.trials, shares.confirmation, shares.probes, shares.parity) == (span, 64.0, 10.0, 0.0)
    assert abs(shares.overhead - 26.0) < 1e-6
    text = shares.text()
    assert f"probes 10 s, trials {span:.0f} s, confirmation 64 s, overhead 26 s" in text
    assert "parity" not in text  # not run in this call: not shown


def test_a_resumed_call_counts_only_what_it_ran(make_study):
    _, folder, since, span = _planted(make_study)
    later = wall_shares(folder, wall=30.0, since=since + span + 1000)  # after every trial and re-run ended
    assert (later.trials, later.confirmation) == (0.0, 0.0) and later.overhead == 20.0  # probes.json is new


def test_the_summary_prints_and_keeps_them(make_study, capsys):
    from tuner.analysis import Study
    from tuner.cli.search import _print_summary, _summary_json
    from tuner.search import SearchSummary

    reports, folder, since, span = _planted(make_study)
    summary = SearchSummary(Study.load(folder), ran=3, total=3, seconds=span + 100, started=since)
    _print_summary(summary)
    assert f"time: probes 10 s, trials {span:.0f} s, confirmation 64 s, overhead 26 s" in capsys.readouterr().out
    doc = _summary_json(summary)["time"]
    assert (doc["probes"], doc["confirmation"], doc["overhead"]) == (10.0, 64.0, 26.0)


def test_a_derived_targets_reference_runs_are_their_own_share_in_the_call_that_set_it(make_study):
    """A ResNet-18 study's 3 reference runs (95 s) read as overhead: study.json's target keeps their seconds."""
    _, folder, since, span = _planted(make_study)
    meta = json.loads(folder.meta_path.read_text())
    meta["created"] = datetime.fromtimestamp(since - 2).astimezone().isoformat()
    meta["target"] = {"metric": "fid", "value": 200.0, "eval_every_samples": 64, "source": "baseline",
                      "reference_seconds": 95.0}
    folder.meta_path.write_text(json.dumps(meta))
    shares = wall_shares(folder, wall=span + 64 + 10 + 95 + 26, since=since - 5)
    assert shares.target == 95.0 and abs(shares.overhead - 26.0) < 1e-6
    assert "probes 10 s, target runs 95 s, trials" in shares.text()
    resumed = wall_shares(folder, wall=30.0, since=since + span + 1000)  # a resume never derives it again
    assert resumed.target == 0.0
