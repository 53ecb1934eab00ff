"""The live view's lines a user reads while a study runs."""

from __future__ import annotations

import io

from rich.console import Console

from tuner.cli.progress import SearchView
from tuner.study import Objective


def view(buf: io.StringIO) -> SearchView:
    console = Console(file=buf, width=200, force_terminal=False)
    return SearchView(console, total=4, done=4, objectives=[Objective(metric="throughput", direction="max")],
                      params=[])


def test_a_confirmation_round_says_how_many_re_runs_each_trial_gets():
    buf = io.StringIO()
    v = view(buf)
    v.confirming({5: 2, 0: 2})
    v.confirming({7: 2, 0: 1})  # a moved pick's round: the baseline read again between its two re-runs
    lines = buf.getvalue().splitlines()
    assert "confirming trials 5, 0: 4 re-runs, 2 each, interleaved" in lines[0]
    assert "confirming trials 7, 0: 3 re-runs, 2 of trial 7, 1 of trial 0, interleaved" in lines[1]
    assert v.total == 4 + 3  # the status line counts this round's re-runs on from what is done
