"""OptunaSearch, taught what Ray's version does not do.

1. Stable trial numbers: the Optuna trial's `.number` goes into the config, so results live under
   `trials/<NNNN>/` and match the study database, across resumes.
2. Failures teach the sampler: a trial that ran out of memory, diverged or errored is told to Optuna as COMPLETE
   with finite penalty values and a violated constraint (`trial.set_constraint`, Optuna 5). TPE and NSGA-II rank
   infeasible trials below every feasible one, so the failing region stops being proposed. Plain FAIL would be
   ignored by the samplers, and NaN would leave the trial RUNNING forever.
3. Loader knobs decided by probes (tuner.search._probe): the sampler searches the rest, and each trial gets the
   loader chosen for its batch size as constants.
4. A wall-time cap per trial, from the budget and the trials so far, so one very slow config cannot hold the
   study hostage (the engine stops it and still reports its measured throughput, `capped=True`); and with
   --study-seconds, no trial started that cannot finish in the time left (tuner.search._allowance).
5. One place records a finished trial (`_record`): its Optuna attributes, the tell, then its result.json and
   trials.csv row (through tuner.search._storage.keep_record, the folder's one writer of a trial's record). A trial a rung scheduler stopped is recorded `stopped` from its last rung report and told to
   Optuna as PRUNED (see _STOPPED_TELL), and so is one the race stopped (`not reached`, FinalReport.stopped); an errored trial waits for the recorder callback, which has Ray's error
   text, and is recorded through `record_error`.
6. A trial whose set-up (the workload's factory or datasets()) ran past setup_timeout_s ends the search: each
   further trial would wait the whole timeout on the same hang (300 s by default; issue 37). `hung` says why.
7. A draw that repeats a trial's config is drawn anew (tuner.search._redraw): told FAIL, its number skipped.

It uses OptunaSearch's private attributes `_ot_trials`, `_ot_study`, `_completed_trials` (checked against
ray 2.60; pyproject pins ray < 2.61).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from tuner.config import Budget
from tuner.study import Objective, ProbePlan, StudyFolder, TrialRecord
from tuner.space import Space
from tuner.search._storage import RECORD_ATTR, fail_if_running, keep_record, storage_failure
from tuner.search._outcome import CONSTRAINT, tell_trial, wall_limit
from tuner.search._redraw import REPEAT_ATTR, constants, enqueued_params, redraws_for, twin_of
from tuner.search._protocol import FinalReport, RungReport, TrialLimits, TrialOrder, from_tune, objective_key
from tuner.search._trial import learned_reserve, scored
from tuner.train import is_setup_timeout

logger = logging.getLogger(__name__)

# How a trial the rung scheduler stopped reaches Optuna: "pruned" (PRUNED, no values: TPE and NSGA-II leave it out
# of their models and fronts) or "complete" (COMPLETE with its rung values, feasible: the sampler learns from
# them, and Optuna's own best_trials may then hold early figures; tuner's front is the study folder's). Never FAIL.
_STOPPED_TELL = "pruned"


class SpaceFunction:
    """Define-by-run function for OptunaSearch (a picklable object: Ray saves the searcher with it)."""

    def __init__(self, space: Space, context: dict[str, Any], loaders: ProbePlan | None = None) -> None:
        self.space = space
        self.context = dict(context)
        self.loaders = loaders

    def __call__(self, trial: Any) -> dict[str, Any] | None:
        if self.loaders is None:
            self.space.sample(trial, self.context)
            return None
        drawn = self.space.sample(trial, self.context, skip=self.loaders.knobs)
        # An enqueued trial (the baseline: tuner's defaults) keeps its own loader knobs; the others get the
        # loader the probes chose for their batch size, as constants the sampler does not model.
        return constants(self.loaders, drawn, enqueued_params(getattr(trial, "ot_trial", trial)))


class StudySearcher(OptunaSearch):
    """OptunaSearch over a tuner Space, multi-objective, with failure constraints and stable trial numbers."""

    def __init__(
        self,
        space: Space,
        objectives: list[Objective],
        *,
        context: dict[str, Any],
        budget: Budget,
        sampler: Any,
        storage: Any,
        study_name: str,
        train_seconds: list[float] | None = None,
        fixed_wall_limit_s: float | None = None,
        baseline: dict[str, Any] | None = None,
        loaders: ProbePlan | None = None,
        study_dir: Path | None = None,
        rungs: list[float] | None = None,
        limits: TrialLimits | None = None,
        score_seconds: list[float] | None = None,
        allowance: Any = None,
        trials: int | None = None,
    ) -> None:
        self._objectives = list(objectives)
        self._folder = StudyFolder(Path(study_dir)) if study_dir is not None else None
        self._rungs = [float(b) for b in rungs or []]
        self._errored: set[str] = set()  # told by Ray as errored, recorded when the recorder brings Ray's error
        self._budget = budget
        self._train_seconds = list(train_seconds or [])
        self._fixed_wall_limit_s = fixed_wall_limit_s
        self._limits = limits or TrialLimits()  # the study's (tuner.search._trial.budget_limits), in every order
        self._score_seconds = list(score_seconds or [])  # complete trials' measured scoring (quality_seconds)
        self._allowance = allowance  # tuner.search._allowance.Allowance: --study-seconds
        self.hung: str | None = None  # a trial's set-up timed out: what the live view says, and no trial more
        self.storage_failed: BaseException | None = None  # telling Optuna failed (a full disk): no trial more
        self._loaders = loaders
        self.redrawn: list[int] = []  # Optuna trials told FAIL as repeats of a trial's config (tuner.search._redraw)
        self.repeated: list[int] = []  # trials that ran a repeat: REDRAWS draws found no other config
        # draws of a repeat before it runs: none where the space holds no more configs than the study's trials
        self._redraws = redraws_for(space, context, loaders, trials) if trials is not None else 0
        super().__init__(
            space=SpaceFunction(space, context, loaders),
            metric=[objective_key(o) for o in objectives],
            mode=[o.mode for o in objectives],
            sampler=sampler,
            storage=storage,
            study_name=study_name,
            points_to_evaluate=[baseline] if baseline else None,  # enqueued: asked before any sampled trial
        )

    @property
    def study(self) -> Any:
        return self._ot_study

    # Ray pickles the searcher into the study folder (tuner.pkl, searcher-state-*.pkl) for Tuner.restore, which
    # tuner never uses (it resumes from the Optuna database). The Optuna storage and what holds it stay out of
    # those files: its URL may carry a database password.
    _UNPICKLED = ("_storage", "_ot_study", "_ot_trials")

    def __getstate__(self) -> dict[str, Any]:
        return {k: (None if k in self._UNPICKLED else v) for k, v in self.__dict__.items()}

    def save(self, checkpoint_path: str) -> None:
        import pickle

        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__getstate__(), f)

    def suggest(self, trial_id: str) -> dict | str | None:
        if self._allowance is not None and not self._allowance.may_start():
            from ray.tune.search import Searcher

            return Searcher.FINISHED  # the time left is the confirmation's: start nothing more, kill nothing
        if self.storage_failed is not None:
            from ray.tune.search import Searcher

            return Searcher.FINISHED  # the study cannot be written: the search ends with that error (tuner.search._runner)
        if self.hung is not None:
            from ray.tune.search import Searcher

            return Searcher.FINISHED  # the same hang again would cost each trial its whole set-up timeout
        config = self._new_config(trial_id)
        if config is None:
            return None
        limits = replace(learned_reserve(self._limits, self._score_seconds), rungs=tuple(self._rungs),
                         wall_limit_s=self._fixed_wall_limit_s or wall_limit(self._budget, self._train_seconds))
        return TrialOrder(trial=self._ot_trials[trial_id].number, params=config, limits=limits).to_config()

    def _new_config(self, trial_id: str) -> dict | None:
        """The sampler's draw, drawn anew while it repeats a trial's config (tuner.search._redraw): the repeat is
        told FAIL, which the samplers leave out, and its number is skipped; after REDRAWS repeats it runs, and so
        does every later draw (the space holds few configs or none not yet run: no more failed draws in the study).
        A study of no fewer trials than its space has configs never redraws (self._redraws 0)."""
        for _ in range(0 if self.repeated else self._redraws):
            config = super().suggest(trial_id)
            ot_trial = self._ot_trials.get(trial_id)
            twin = None if config is None or ot_trial is None else twin_of(self._ot_study, ot_trial, self._loaders)
            if twin is None:
                return config
            try:
                ot_trial.set_user_attr(REPEAT_ATTR, twin)  # why it failed, for a dashboard reader
            except Exception as exc:  # never lose the tell over bookkeeping
                logger.warning("could not annotate trial %s: %s", ot_trial.number, exc)
            self._tell(ot_trial, None, state="fail")
            if self.storage_failed is not None:
                return None  # the study cannot be written: the next suggest ends the search
            self.redrawn.append(ot_trial.number)
            del self._ot_trials[trial_id]
        config = super().suggest(trial_id)
        if self._redraws and config is not None and (ot_trial := self._ot_trials.get(trial_id)) is not None \
                and twin_of(self._ot_study, ot_trial, self._loaders) is not None:
            self.repeated.append(ot_trial.number)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        return None  # Optuna cannot take intermediate values of a multi-objective study; the scheduler reads them

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self._completed_trials or trial_id not in self._ot_trials:
            return
        ot_trial = self._ot_trials[trial_id]
        report = from_tune(result)
        record = report.record if isinstance(report, (RungReport, FinalReport)) else None
        if error:
            # The trial process raised or died: the recorder's on_trial_error follows with Ray's error text and
            # records it (record_error); what it reported before (a rung's `stopped` record) is not its outcome.
            self._errored.add(trial_id)
            return
        if record is None:
            # Stopped before it reported (the search was interrupted): not the config's fault, so FAIL, which
            # the samplers ignore; resume proposes a new trial in its place.
            self._tell(ot_trial, None, state="fail")
            self._completed_trials.add(trial_id)
            return
        self._record(trial_id, record, report)  # type: ignore[arg-type]

    def record_error(self, trial_id: str, record: TrialRecord) -> TrialRecord | None:
        """An errored trial, with the record the recorder made from Ray's error text (under this trial's number).
        None when this searcher has nothing pending for it."""
        if trial_id not in self._errored or trial_id in self._completed_trials:
            return None
        self._errored.discard(trial_id)
        record.trial = self._ot_trials[trial_id].number
        return self._record(trial_id, record, None)

    def _record(self, trial_id: str, record: TrialRecord, report: RungReport | FinalReport | None) -> TrialRecord:
        """The one place a finished trial is recorded: its Optuna attributes and tell first (the database is what
        --resume trusts), then result.json and its trials.csv row (rewritten from the attributes by --resume if a
        kill comes between)."""
        ot_trial = self._ot_trials[trial_id]
        stopped = record.state == "stopped" or (isinstance(report, FinalReport) and report.stopped)  # the race's
        feasible = bool(report is not None and report.feasible) and (record.complete or stopped)  # not reached too
        values = None  # a failed trial: penalties and a violated constraint (tell_trial)
        if feasible:
            values = [float(report.values[o.metric]) for o in self._objectives]  # type: ignore[union-attr]
        pruned = stopped and (_STOPPED_TELL == "pruned" or not feasible)
        try:
            if pruned:  # feasible: stopped for its rank, not failed (tell_trial sets it for the others)
                ot_trial.set_constraint(CONSTRAINT, 0.0)
            ot_trial.set_user_attr(RECORD_ATTR, record.to_json())  # its state too: one write (a commit) a trial
        except Exception as exc:  # never lose the tell over bookkeeping
            logger.warning("could not annotate trial %s: %s", ot_trial.number, exc)
        if pruned:
            self._tell(ot_trial, None, state="pruned")
        else:  # values, or penalties and a violated constraint (the benchmarks tell the same way)
            self._tell(ot_trial, values, state="complete")
        self._completed_trials.add(trial_id)
        if self._folder is not None:
            keep_record(self._folder, record)
        if self._allowance is not None:
            self._allowance.finished(record.run_seconds, whole=record.complete and feasible, capped=record.capped)
        seconds = record.value("train_seconds")
        if record.complete and feasible and seconds is not None:
            self._train_seconds.append(seconds)
        self._score_seconds.extend(scored([record]))
        if record.state == "error" and is_setup_timeout(record.error):
            from tuner.search._hang import setup_timeout_text

            what = setup_timeout_text(record.error) or "its set-up did not return within setup_timeout_s"
            self.hung = (f"trial {record.trial}: {what}: no further trial started (each would wait as long on the "
                         f"same hang); fix the workload's factory or datasets(), or raise setup_timeout_s, and "
                         f"--resume")
        return record

    def _tell(self, ot_trial: Any, values: list[float] | None, *, state: str) -> None:
        from optuna.trial import TrialState

        try:
            if state == "fail":
                self._ot_study.tell(ot_trial, state=TrialState.FAIL)
            elif state == "pruned":
                self._ot_study.tell(ot_trial, state=TrialState.PRUNED)
            else:
                tell_trial(self._ot_study, ot_trial, self._objectives, values)
        except Exception as exc:  # e.g. already finished by a previous run
            if storage_failure(exc, Path(".")) is not None:  # the storage cannot be written (a full disk)
                self.storage_failed = self.storage_failed or exc
                return
            logger.warning("could not tell Optuna about trial %s: %s", ot_trial.number, exc)

    def unfinished(self) -> list[int]:
        """Numbers of trials this searcher asked for but never told (interrupted)."""
        return [t.number for tid, t in self._ot_trials.items() if tid not in self._completed_trials]

    def trial_id_of(self, number: int) -> str | None:
        return next((tid for tid, t in self._ot_trials.items() if t.number == number), None)

    def fail_unfinished(self) -> None:
        """Trials asked for but never told (Ctrl-C) become FAIL, so --resume runs them again."""
        for number in self.unfinished():
            fail_if_running(self._ot_study, number)

