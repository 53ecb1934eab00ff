"""What `run_search` returns (tuner.search._runner): the study as it stands at the end of the call, and what the
call did. `tuner search` prints it (tuner.cli); tuner.search exports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.study import Objective, TrialRecord
from tuner.analysis import Study, Verdict


@dataclass
class SearchSummary:
    """What `run_search` returns: the study as it stands, and what this call did.

    Attributes:
        study: the study (its records, objectives, front), as read back from its folder.
        ran: trials recorded by this call.
        total: trials asked for (with `study_seconds` and no count: what ran).
        seconds: this call's wall time.
        started: the call's start (epoch seconds): what `shares` counts as this call's.
        interrupted: a signal stopped it; `exit_code` is 128 + the signal.
        warnings: what the search warned about (also printed on `console`).
        notes: the study's `note:` lines (the effective batch kept, the budget sized, ...).
        exit_code: the exit status `tuner search` gives an interrupted search.
        as_many_as_fit: `study_seconds` without a trial count.
        ended: the line of a set-up timeout that ended the search or its confirmation (no trial or re-run more:
            each would wait as long); `tuner search` ends with it as a WorkloadError (exit 2), not as interrupted.
    """

    study: Study  # the study as it stands at the end of the call
    ran: int  # trials recorded by this call
    total: int  # trials asked for
    seconds: float
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the study's `note:` lines (the effective batch kept, the
    # budget sized, ...): information, apart from the warnings; `--format json` lists them as `notes`
    exit_code: int = 130  # when interrupted: 128 + the signal that stopped it (tuner.search._stop)
    as_many_as_fit: bool = False  # --study-seconds without --trials: no count was asked for (`total` is what ran)
    started: float | None = None  # the call's start, epoch seconds: what `shares` counts as this call's
    ended: str | None = None  # a set-up timeout's line that ended the search or the confirmation (exit 2)

    @property
    def shares(self) -> Any:
        """Where this call's wall time went (probes, trials, confirmation, overhead), from the study folder."""
        from tuner.analysis import wall_shares

        return None if self.started is None else wall_shares(self.study.folder, self.seconds, self.started)

    @property
    def name(self) -> str:
        return self.study.name

    @property
    def study_dir(self) -> Path:
        return self.study.dir

    @property
    def objectives(self) -> list[Objective]:
        return self.study.objectives

    @property
    def finished(self) -> int:
        return len(self.study.records)

    @property
    def states(self) -> dict[str, int]:
        return self.study.state_counts()

    @property
    def complete(self) -> int:
        return self.states.get("complete", 0)

    @property
    def verdict(self) -> "Verdict | None":
        """The knee pick, its ties within the noise and its comparison with the baseline (None: nothing to pick)."""
        from tuner.errors import StudyError
        from tuner.analysis import decide

        try:
            return decide(self.study, "knee")
        except StudyError:
            return None

    @property
    def front(self) -> list[TrialRecord]:
        """The Pareto front, best first objective first."""
        objs = self.objectives
        return sorted(self.study.front(), key=lambda r: [-o.goodness(self.study.value(r, o.metric) or 0.0)
                                                         for o in objs])
