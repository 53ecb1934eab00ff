"""What a search says of its study: the line it starts with (announce), and what `run_search` returns
(tuner.search._runner): the study as it stands at the end of the call, and what the call did. `tuner search` prints
it (tuner.cli); tuner.search exports it. How the search ended is said and kept before it is returned (closing):
whether it was cut short or interrupted, the study's noise floor and the allowance's record in study.json."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.study import Objective, TrialRecord
from tuner.analysis import Study, Verdict, niceness_note
from tuner.search._redraw import redraw_note

if TYPE_CHECKING:
    from tuner.search._options import SearchPlan
    from tuner.search._resources import Resources
    from tuner.space import Space


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
        in_confirmation: interrupted with every trial done, the confirmation not finished (--resume runs the
            re-runs left), so the stop line does not read as if the trials were what stopped.
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
    in_confirmation: bool = False  # interrupted after the trials, before the confirmation finished

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


def announce(console: Any, plan: "SearchPlan", space: "Space", context: dict[str, Any], resources: "Resources",
             done: int, allowance: Any, scheduled: bool) -> None:
    """The study's line as it starts: its trials, workload, budget, sampler (and scheduler, where `scheduled`) and
    resources, the `done` trials a resume starts with; and the domains fitted to these trials' resources."""
    from rich.markup import escape

    from tuner.search._allowance import margin

    on = f" on {plan.dataset}" if plan.dataset else ""
    count = "as many trials as fit" if plan.kept_trials else \
        f"{plan.trials} trial{'s' if plan.trials != 1 else ''}"
    if allowance is not None:
        count += f" in {allowance.seconds:g} s (+{margin(allowance.seconds):.0f} s margin)"
    console.print(f"study [bold]{plan.study}[/bold]: {count} of {escape(plan.workload.text + on)}, "
                  f"{plan.budget.describe()} each, sampler {plan.sampler} (seed {plan.seed}"
                  + (f", scheduler {plan.scheduler.describe()}" if scheduled else "") + "); "
                  f"{resources.describe(plan.trials)}" + (f"; resuming with {done} done" if plan.resume else ""),
                  soft_wrap=True)
    fitted = [f"{n} {space.params[n].describe()}" for n, spec in plan.space.params.items() if spec.unresolved]
    if fitted:
        console.print(escape(f"fitted to these trials ({_trial_words(context)}): " + "; ".join(fitted)),
                      soft_wrap=True)


def _trial_words(context: dict[str, Any]) -> str:
    gpus = context.get("gpus") or 0
    words = f"{context.get('cpus')} CPUs per process" + (f", {gpus} GPU" if gpus else "")
    return words + (f", {context['device']}" if context.get("device") else "")


def cut_short(study: Study, plan: "SearchPlan", allowance: Any, searcher: Any = None) -> bool:
    """Whether the search ended with trials missing (interrupted); with --study-seconds, fewer trials than the cap
    is the allowance's doing, not an interruption, and so is a search a set-up timeout ended (searcher.hung)."""
    ended = bool(allowance and allowance.ended) or bool(getattr(searcher, "hung", None))
    return len(study.records) < plan.trials and not ended


def closing(plan: "SearchPlan", t0: float, *, ran: int, search: Any, dropped: list[Any], confirmation: Any,
            phases: Any, allowance: Any, console: Any, prepared: Any) -> SearchSummary:
    """The summary of a search whose Tune run has ended: `ran` trials recorded by this call, `search` the
    StudySearcher (None: nothing was left to search), `dropped` its trials Ctrl-C stopped before they reported,
    `confirmation` the phase (tuner.search._reruns.Confirmation) and `phases` the run's searcher
    (tuner.search._phases). Says how the search ended where the confirmation did not already (the allowance spent,
    a set-up timeout), refuses a study the allowance left without a trial, and keeps the study's noise floor (an
    uninterrupted search) and the allowance's record in study.json."""
    if console is not None and not phases.confirm_started:
        if allowance is not None and allowance.ended:
            console.print(allowance.ending(), soft_wrap=True)
        if search is not None and search.hung:
            from rich.markup import escape

            console.print(escape(search.hung), soft_wrap=True)
    notes = list(prepared.notes)

    def say(note: str) -> None:
        notes.append(note)
        if console is not None:
            from rich.markup import escape

            console.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)

    if search is not None and (repeats := redraw_note(search.redrawn, search.repeated)) is not None:
        say(repeats)  # why the trial numbers skip some (tuner.search._redraw)
    study = Study.load(plan.folder)
    from tuner.train import niceness

    if (nice := niceness_note(study.records, niceness())) is not None:  # a cluster's workers below the user's loop
        say(nice)
    if search is not None and not dropped and not study.records and allowance is not None and allowance.ended:
        from tuner.errors import BudgetError

        # the pre-flight's check passed, but what came after it (the probes, the parity check) left no trial room
        raise BudgetError(f"no trial started: {allowance.ending()}; give a longer --study-seconds with --resume")
    interrupted = bool(dropped) or cut_short(study, plan, allowance, search)
    reruns_hung = getattr(confirmation.reruns, "hung", None)
    in_confirmation = False
    if not interrupted:  # a re-run's set-up timeout ended the confirmation (reruns_hung): not a signal
        interrupted = in_confirmation = not reruns_hung and not confirmation.finished(phases)
        noise = study.noise()
        if noise is not None:  # the study's own noise floor, kept with the study
            plan.folder.write_meta(study.meta.model_copy(update={"noise": noise.to_json()}))
            study = Study.load(plan.folder)
    if allowance is not None:  # what the allowance came to: the wall time spent, whether it ended the search
        plan.folder.write_meta(study.meta.model_copy(
            update={"allowance": allowance.to_json(spent=time.perf_counter() - t0)}))
        study = Study.load(plan.folder)
    # "as many as fit" (no --trials): no count was asked for; the trials that ran are the total, interrupted or not
    total = len(study.records) if plan.kept_trials else plan.trials
    return SearchSummary(study, ran=ran, total=total, seconds=time.perf_counter() - t0,
                         interrupted=interrupted, warnings=list(prepared.warnings), notes=notes,
                         as_many_as_fit=bool(plan.kept_trials), in_confirmation=in_confirmation,
                         ended=reruns_hung or (search.hung if search is not None else None))
