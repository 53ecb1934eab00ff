"""The confirmation phase: a searcher that hands out the re-runs (tuner.search._confirm) one at a time, and, once
every one is recorded and the confirmed figures moved the knee to a trial never re-run, one re-run of that trial
with the baseline read beside it (and, if it holds it as the pick, its other re-runs beside the baseline's), until
the knee stands on confirmed figures.

It runs in the search's own Tune run (tuner.search._phases), so one trial process serves every round and the
search's last trial (reuse_actors): a Tune run per round, then one for the phase, paid Tune's start-up again
(issue 20 item 6). Each re-run itself runs in a fresh process forked for it by that trial process's server
(tuner.search._fresh), so its figures read as `tuner train`'s would. The driver's side of the phase
(Confirmation) builds that searcher once the search has ended and says, after the run, whether it ran to its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune.search import Searcher

from tuner.search._confirm import confirm_baseline, confirm_set, holds, moved_round, next_knee, next_round, \
    TIE_PASSES, pending, rerun_configs, screen, tie_reads
from tuner.study import StudyFolder, fmt_metric
from tuner.analysis import Study, ranks_windows
from tuner.search._summary import cut_short

if TYPE_CHECKING:
    from tuner.search._options import SearchPlan


class RerunSearcher(Searcher):
    """Suggests the confirmation's re-runs in their interleaved order; decides the next round (a moved knee) only
    when no re-run is running, from the study folder the recorder has written; FINISHED when there is none."""

    def __init__(self, study_dir: Path, trials: int, repeats: int, wall_limit_s: float, view: Any = None,
                 limits: Any = None, allowance: Any = None) -> None:
        super().__init__()
        self.folder = StudyFolder(Path(study_dir))
        self.trials, self.repeats, self.wall = trials, repeats, wall_limit_s
        self.limits = limits  # the study's TrialLimits (tuner.search._trial.budget_limits), or None
        self.allowance = allowance  # tuner.search._allowance.Allowance (--study-seconds): a moved knee needs time
        self.view = view
        self.queue: list[dict[str, Any]] = []
        self.running = 0
        self.issued = 0
        self.screening: int | None = None  # the moved pick whose first re-run is out (a screen)
        self.done = False  # True once no re-run is left to hand out: the phase ran to its end
        self.hung: str | None = None  # a re-run's set-up timed out: no re-run more (each would wait as long)

    def __getstate__(self) -> dict[str, Any]:  # Ray pickles the tune config; the live view stays here
        return {**self.__dict__, "view": None}

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return True

    def suggest(self, trial_id: str) -> dict | None:
        if self.hung is not None:
            return Searcher.FINISHED  # not done: --resume runs the re-runs left
        if not self.queue:
            if self.running:  # the next round depends on these re-runs' figures
                return None
            if not self._next_round():
                self.done = True
                return Searcher.FINISHED
        self.running += 1
        self.issued += 1
        return self.queue.pop(0)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.running = max(0, self.running - 1)
        from tuner.search._hang import setup_timeout_text
        from tuner.search._protocol import record_of

        record = record_of(result) if result else None
        if record is None or record.state != "error" or self.hung is not None:
            return
        what = setup_timeout_text(record.error)
        if what is not None:
            self.hung = (f"trial {record.trial}'s re-run: {what}: no further re-run started (each would wait as "
                         f"long on the same hang); fix the workload's factory or datasets(), or raise "
                         f"setup_timeout_s, and --resume")
            self.queue = []
            if self.view is not None:
                from rich.markup import escape

                self.view.console.print(escape(self.hung), soft_wrap=True)

    def _next_round(self) -> bool:
        study = Study.load(self.folder)
        pairs = pending(study, self.trials, self.repeats)
        trials = confirm_set(study, self.trials)
        if pairs and all(run.round == 0 and run.repeat >= self.repeats for run in pairs):  # a tie pass (tie_pass)
            if self.allowance is not None and \
                    self.allowance.left() < len(pairs) * self.allowance.trial_estimate():
                if self.view is not None:
                    self.view.console.print("the confirmed trials are tied within the noise; --study-seconds leaves "
                                            "no time to re-run them once more", soft_wrap=True)
                return False
            if self.view is not None:
                which = ", ".join(str(t) for t in sorted({run.trial for run in pairs}))
                why = " (one of their re-runs is an outlier)" \
                    if any(run.repeat >= self.repeats + TIE_PASSES for run in pairs) else ""
                self.view.console.print(f"trials {which} are tied within the noise, and only a cost rule (fewer "
                                        f"environment changes, fewer workers, less memory) tells them apart{why}: "
                                        f"re-running each once more",
                                        soft_wrap=True)
        if self.screening is not None:
            self._say_screened(study, self.screening, more=bool(pairs),
                               again=any(run.trial != self.screening for run in pairs))
            self.screening = None
        if not pairs:
            moved = next_knee(study, self.trials) if self.repeats > 0 else None
            if moved is None:
                return False
            baseline = confirm_baseline(study, self.trials)
            pairs = moved_round(moved, next_round(study, self.trials), self.repeats, baseline, {},
                                tie_reads(study, self.trials, self.repeats))
            trials = [moved, *([baseline] if baseline is not None and baseline != moved else [])]
            if self.allowance is not None and self.allowance.left() < len(pairs) * self.allowance.trial_estimate():
                if self.view is not None:
                    self.view.console.print(f"the confirmed figures moved the pick to trial {moved}, which has one "
                                            f"reading; --study-seconds leaves no time to confirm it", soft_wrap=True)
                return False
            pairs, self.screening = screen(pairs, moved), moved  # the rest follows only if it holds (holds())
            if self.view is not None:
                beside = f", beside the baseline (trial {baseline}) read in the same round," \
                    if len(pairs) > 1 else ""
                self.view.console.print(f"the confirmed figures moved the pick to trial {moved}, which has one "
                                        f"reading: re-running it once{beside} to see whether it holds",
                                        soft_wrap=True)
        if self.view is not None:
            counts = {t: sum(run.trial == t for run in pairs) for t in trials}
            self.view.confirming({t: n for t, n in counts.items() if n})
        self.queue = rerun_configs(study, pairs, self.wall, self.limits)
        return bool(self.queue)

    def _say_screened(self, study: Study, trial: int, more: bool, again: bool = False) -> None:
        """After a moved pick's first re-run (and the baseline's beside it): whether it held (the round goes on,
        where R > 1; `again`: the baseline is read again in it) or not (the chase moves on)."""
        if self.view is None:
            return
        record = next(r for r in study.records if r.trial == trial)
        baseline = confirm_baseline(study, self.trials)
        if holds(study, trial):
            again = f", beside the baseline (trial {baseline}) again" if baseline is not None and again else ""
            self.view.console.print(f"trial {trial}'s re-run holds it as the pick" +
                                    (f": confirming it{again}" if more else ""), soft_wrap=True)
            return
        if record.confirmed is not None and record.confirmed.suspect and ranks_windows(study.objectives):
            self.view.console.print(f"trial {trial}'s re-run is suspect ({record.confirmed.suspect}), so it cannot "
                                    f"be the pick: not re-run again", soft_wrap=True)
            return
        figures = record.confirmed.figures if record.confirmed is not None else {}
        read = ", ".join(f"{o.metric} {fmt_metric(o.metric, figures[o.metric].values[-1])} "
                         f"(search {fmt_metric(o.metric, record.value(o.metric))})"
                         for o in study.objectives if o.metric in figures)
        self.view.console.print(f"trial {trial}'s re-run did not hold it as the pick ({read or 'no figures'}): "
                                f"not re-run again", soft_wrap=True)

    def save(self, checkpoint_path: str) -> None:  # resume reads the study folder, not Tune's state
        pass

    def restore(self, checkpoint_path: str) -> None:
        pass


class Confirmation:
    """The confirmation phase (tuner.search._confirm) once the search has ended, in the same Tune run
    (tuner.search._phases): the missing re-runs in their interleaved order (RerunSearcher); then, while the
    confirmed figures move the knee to a trial never re-run, that trial's re-runs (at most MAX_EXTRA of them, and
    with --study-seconds only while the time left holds them: the verdict then names the unconfirmed rival), so
    the export stands on confirmed figures.

    Each re-run runs in a fresh process, as `tuner train` runs the export: re-runs sharing one process agreed
    within 1% while fresh processes of the same config read 290-329 samples/s (a nanoGPT-style model on this CPU;
    benchmarks/results/retrain.md), so an interval from shared-process re-runs was too narrow to hold. The trial
    process forks each re-run from its import-only server (tuner.search._fresh): a fresh Ray actor per re-run cost
    about 2 s more of Ray's and Tune's turnover each, a fresh interpreter 2-3 s of imports."""

    def __init__(self, plan: "SearchPlan", view: Any, allowance: Any, console: Any) -> None:
        from tuner.search._recorder import RerunRecorder

        self.plan, self.view, self.allowance, self.console = plan, view, allowance, console
        self.recorder = RerunRecorder(plan.study_dir, plan.storage, plan.optuna_name, view)
        self.reruns: Any = None  # the RerunSearcher, once the search ended with re-runs to do
        self.search: Any = None  # the search's StudySearcher (None: nothing was left to search)

    def searcher(self) -> Any:
        """Called by the Tune run's searcher when the search's last trial has ended: the re-runs' searcher, or None
        when the search was cut short (nothing to confirm on) or nothing is left to confirm."""
        from tuner.search._outcome import wall_limit
        from tuner.search._trial import budget_limits, learned_reserve, scored, trained

        plan, allowance = self.plan, self.allowance
        study = Study.load(plan.folder)
        if cut_short(study, plan, allowance, self.search):
            return None  # an interrupted search is not confirmed (resume does both)
        if allowance is not None and allowance.ended and self.console is not None:
            self.console.print(allowance.ending(), soft_wrap=True)
        if getattr(self.search, "hung", None) and self.console is not None:
            from rich.markup import escape

            self.console.print(escape(self.search.hung), soft_wrap=True)
        first = pending(study, plan.confirm_trials, plan.confirm_repeats)
        if not first and (plan.confirm_repeats <= 0 or next_knee(study, plan.confirm_trials) is None):
            return None
        wall = plan.options.wall_limit_s or wall_limit(plan.budget, trained(study.records))
        limits = learned_reserve(budget_limits(plan.preflight), scored(study.records))
        self.reruns = RerunSearcher(plan.study_dir, plan.confirm_trials, plan.confirm_repeats, wall, self.view,
                                    limits=limits, allowance=allowance)
        return self.reruns

    def finished(self, phases: Any) -> bool:
        """After the run: whether the confirmation ran to its end with every re-run recorded (or had none to do);
        False when it was interrupted, or never began though the search ended."""
        if not phases.confirm_started:
            return False
        if self.reruns is None:
            return True
        return bool(self.reruns.done) and len(self.recorder.recorded) == self.reruns.issued
