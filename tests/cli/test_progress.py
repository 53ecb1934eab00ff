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
