"""The live view's lines a user reads while a study runs."""

from __future__ import annotations

import io

from rich.console import Console

from tuner.cli.progress import SearchView
from tuner.study import Objective, Rerun


def view(buf: io.StringIO) -> SearchView:
    console = Console(file=buf, width=200, force_terminal=False)
    return SearchView(console, total=4, done=4, objectives=[Objective(metric="throughput", direction="max")],
                      params=[])


def test_a_confirmation_round_says_how_many_re_runs_each_trial_gets():
    buf = io.StringIO()
    v = view(buf)
    v.confirming({5: 2, 0: 2})
    v.confirming({7: 1})  # a moved pick's first re-run alone (the screen)
    v.rerun_finished(7, Rerun(repeat=0, round=1, state="complete", metrics={"throughput": 210.0}))
    v.confirming({0: 1, 7: 1})  # it held: the baseline read again, then its second re-run
    lines = buf.getvalue().splitlines()
    assert "confirming trials 5, 0: 4 re-runs, 2 each, interleaved" in lines[0]
    assert "confirming trial 7: 1 re-run" in lines[1] and "interleaved" not in lines[1]
    assert "#0007 re-run 1" in lines[2] and "throughput 210" in lines[2]
    assert "confirming trials 0, 7: 2 re-runs, 1 each, interleaved" in lines[3]
    assert v.total == 4 + 1 + 2  # the status line counts each round's re-runs on from what is done


def test_a_trials_line_labels_its_process_time_so_it_is_not_read_as_its_wall_time():
    """run_seconds (set-up, noise scale, scoring) is longer than wall_seconds: the line says which it is."""
    from tuner.cli.progress import trial_line
    from tuner.study import TrialRecord

    r = TrialRecord(trial=0, state="complete", throughput=100.0, wall_seconds=29.8, run_seconds=48.1)
    line = trial_line(r, [Objective(metric="throughput", direction="max")], []).plain
    assert "run 48.1 s" in line


def _rows(table) -> list[list[str]]:
    """The table's body rows as a user sees them, each a list of its cells."""
    buf = io.StringIO()
    Console(file=buf, width=200, force_terminal=False).print(table)
    return [[c.strip() for c in line.split("│")[1:-1]] for line in buf.getvalue().splitlines()
            if line.startswith("│")]


def test_a_pick_off_the_front_gets_its_own_row_so_the_summary_shows_the_trial_its_pick_line_names():
    """The default study of 2026-11-27: trial 4's single reading dominated the confirmed pick, trial 6, and the
    summary's table showed trials 4 and 11 only, beside a pick line naming 6."""
    from tuner.cli.progress import front_table
    from tuner.study import Confirmed, ConfirmedFigure, TrialRecord

    objectives = [Objective(metric="throughput", direction="max"), Objective(metric="fid", direction="min")]
    four = TrialRecord(trial=4, state="complete", throughput=1184.8, metrics={"fid": 60.08}, params={"beta1": 0.09})
    eleven = TrialRecord(trial=11, state="complete", throughput=1148.9, metrics={"fid": 47.47}, params={"beta1": 0.02})
    six = TrialRecord(trial=6, state="complete", throughput=1150.0, metrics={"fid": 79.44}, params={"beta1": 0.08},
                      confirmed=Confirmed(runs=2, states=["complete"] * 2, figures={
                          "throughput": ConfirmedFigure(values=[1161.0, 1162.2], centre=1161.6, low=1122.9,
                                                        high=1201.5)}))
    table = front_table([four, eleven], objectives, ["beta1"], "Pareto front (2 trials)", pick=six)
    rows = _rows(table)
    assert [r[0] for r in rows] == ["4", "11", "6 ✓ pick"]
    assert table.title == "Pareto front (2 trials); below the line, the pick (off the front)"  # 3 rows, 2 counted
    assert rows[2][1:] == ["1161.6 (1122.9-1201.5)", "79.44", "0.08"]


def test_a_pick_on_the_front_is_marked_in_place_not_repeated():
    from tuner.cli.progress import front_table
    from tuner.study import TrialRecord

    objectives = [Objective(metric="throughput", direction="max")]
    front = [TrialRecord(trial=3, state="complete", throughput=10.0), TrialRecord(trial=1, state="complete",
                                                                                  throughput=9.0)]
    table = front_table(front, objectives, [], "Pareto front (2 trials)", pick=front[1])
    assert _rows(table) == [["3", "10.0"], ["1 pick", "9.0"]] and table.title == "Pareto front (2 trials)"
