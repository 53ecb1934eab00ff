"""What a study says of the conditions its trials ran in, beside its figures (tuner.analysis.busy)."""

from __future__ import annotations

from tuner.analysis import niceness_note
from tuner.study import RunEnvironment, TrialRecord


def _records(*niceness: int | None) -> list[TrialRecord]:
    return [TrialRecord(trial=n, state="complete", metrics={"throughput": 100.0},
                        environment=RunEnvironment(niceness=nice) if nice is not None else None)
            for n, nice in enumerate(niceness)]


def test_trials_below_the_studys_own_niceness_are_said_with_how_to_start_the_nodes():
    """A cluster's `ray start` runs Ray's workers at niceness 15: beside other work those trials read slower than
    the user's loop would, so the study names how many and the setting that runs them at the user's niceness."""
    note = niceness_note(_records(15, 15, 10, None), own=0)
    assert note is not None and note.startswith("3 of 4 trials ran at niceness 10 or 15, above this process's 0")
    assert "RAY_worker_niceness=0" in note
    assert niceness_note(_records(15), own=5).endswith("RAY_worker_niceness=5 in its environment")


def test_trials_at_or_above_the_users_priority_or_unrecorded_say_nothing():
    assert niceness_note(_records(0, 0), own=0) is None  # a local study's Ray: the study's own niceness
    assert niceness_note(_records(0, 5), own=5) is None  # started nicer by the user: nothing below it
    assert niceness_note(_records(None, None), own=0) is None  # records from before the niceness was kept
    assert niceness_note(_records(15), own=None) is None  # no niceness on this platform
