"""A study a rung scheduler ran (issue 20): `stopped` is a state in every view, shows what it measured and the rung
it reached, never counts as a failure, and is never ranked against trials that reached the top rung.

The planted study (tests/studies.py, kind "asha"): trials 0-2 complete at the top rung (45 s), trial 3 stopped at
rung 0 (5 s) with figures that would dominate every complete trial if ranked, trial 4 stopped at rung 1, 5 oom."""

import csv
import io
import json

from rich.console import Console

from tuner.cli import main
from tuner.report.export import build_export
from tuner.report.html import render_html
from tuner.report.plots import pareto_svg
from tuner.report.view import study_json, study_table, trial_panel
from tuner.search._confirm import plan_reruns
from tuner.cli.progress import trial_line
from tuner.analysis import decide, open_study
from tuner.study import STATE_COLORS


def render(*renderables):
    buf = io.StringIO()
    console = Console(file=buf, width=260, color_system=None)
    for r in renderables:
        console.print(r)
    return buf.getvalue()


def asha(make_study):
    return open_study(make_study("asha-demo", "asha"), "asha-demo")


def rows(text):
    return [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()
            if "│" in line and any(s in line for s in ("complete", "stopped", "oom"))]


def test_stopped_is_never_ranked_nor_front_knee_export_or_confirmed(make_study):
    s = asha(make_study)
    assert set(s.ranks) == {0, 1, 2}  # a 5 s reading (trial 3: fastest and best fid) is not ranked against 45 s
    assert {r.trial for r in s.front()} == {1, 2}
    assert build_export(s, "knee").record.trial == 2
    assert build_export(s, "throughput").record.trial == 1  # not trial 3, which was faster at 5 s
    assert build_export(s, "quality").record.trial == 2  # not trial 3's fid 10 at 5 s
    assert 3 not in plan_reruns(s, 5) and 4 not in plan_reruns(s, 5)
    assert decide(s, "knee").pick.trial == 2
    provenance = build_export(s, "knee").document["provenance"]
    assert provenance["measured_at"] == {"rung": 2, "budget": 45.1, "unit": "s"}  # the top rung's figures


def test_table_shows_stopped_with_rung_and_budget_and_its_figures(make_study):
    s = asha(make_study)
    text = render(study_table(s))
    cells = rows(text)
    assert [c[1] for c in cells] == ["1", "2", "0", "4", "3", "5"]  # ranked, then stopped (highest rung first), oom
    by_trial = {c[1]: c for c in cells}
    assert by_trial["3"][0] == "-" and by_trial["3"][2] == "stopped (rung 0)" and by_trial["3"][3] == "rung 0, 5 s"
    assert by_trial["1"][3] == "rung 2, 45.2 s" and by_trial["4"][3] == "rung 1, 15.1 s"
    assert "1000.0" in by_trial["3"][4]  # its throughput is real data and shows
    assert "measured at" in text and "never ranked" in text


def test_unscheduled_study_looks_as_before(make_study):
    s = open_study(make_study(), "gan-demo")
    assert not s.scheduled
    assert "measured at" not in render(study_table(s))
    assert all("measured_at_unit" not in d for d in study_json(s))
    header = next(csv.reader(io.StringIO(s.folder.csv_path.read_text())))
    assert "rung" not in header and "measured_at" not in header
    assert "stopped at a rung" not in pareto_svg(s, 2)


def test_trial_detail_says_stopped_where_and_not_failed(make_study, capsys):
    s = asha(make_study)
    text = render(*trial_panel(s, s.trial(3)))
    assert "stopped by the scheduler at a rung (not a failure" in text
    assert "measured at: rung 0, 5 s" in text and "never ranked" in text
    assert "1000" in text and "fid" in text
    code = main(["report", "asha-demo", "--reports-dir", str(s.dir.parent), "--trial", "4"])
    out = capsys.readouterr().out
    assert code == 0 and "stopped" in out and "rung 1, 15.1 s" in out


def test_json_carries_state_rung_budget_and_no_rank(make_study, capsys):
    s = asha(make_study)
    code = main(["report", "asha-demo", "--reports-dir", str(s.dir.parent), "--format", "json"])
    docs = {d["trial"]: d for d in json.loads(capsys.readouterr().out)["trials"]}
    assert code == 0
    stopped = docs[3]
    assert stopped["state"] == "stopped" and stopped["rung"] == 0 and stopped["measured_at"] == 5.0
    assert stopped["measured_at_unit"] == "s" and stopped["rank"] is None and stopped["front"] is False
    assert stopped["throughput"] == 1000.0 and stopped["fid"] == 10.0
    assert docs[1]["rung"] == 2 and docs[1]["front"] is True


def test_html_has_stopped_rows_with_their_own_colour_and_marker(make_study):
    s = asha(make_study)
    html = render_html(s)
    assert "stopped" in STATE_COLORS and f".state-stopped{{color:{STATE_COLORS['stopped'][1]}}}" in html
    assert 'class="stopped"' in html and "stopped</span> (rung 0)" in html
    assert "measured at" in html and "rung 0, 5 s" in html
    svg = pareto_svg(s, 2)
    assert svg.count('class="pt stopped"') == 2 and "stopped at a rung" in svg
    assert "complete, no score" not in svg  # the legend holds the kinds drawn
    assert "5 stopped" not in html and "2 stopped" in html  # the count line says stopped, not failed


def test_csv_has_state_rung_and_measured_at(make_study):
    s = asha(make_study)
    with s.folder.csv_path.open() as f:
        table = {r["trial"]: r for r in csv.DictReader(f)}
    assert table["3"]["state"] == "stopped" and table["3"]["rung"] == "0" and table["3"]["measured_at"] == "5.0"
    assert table["3"]["throughput"] == "1000.0"
    assert table["5"]["rung"] == "0" and table["5"]["measured_at"] == ""


def test_stopped_is_not_a_failure_in_the_verdict_or_progress(make_study):
    s = asha(make_study)
    assert s.state_counts() == {"complete": 3, "oom": 1, "stopped": 2}
    text = decide(s, "knee").text
    assert "stopped" not in text and "fail" not in text
    line = trial_line(s.trial(3), s.objectives, s.params()).plain
    assert "stopped" in line and "throughput 1000" in line and "at rung 0" in line
