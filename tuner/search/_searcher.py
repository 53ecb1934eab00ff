"""OptunaSearch, taught four things Ray's version does not do.

1. Stable trial numbers: the Optuna trial's `.number` goes into the config, so results live under
   `trials/<NNNN>/` and match the study database, across resumes.
2. Failures teach the sampler: a trial that ran out of memory, diverged or errored is told to Optuna as COMPLETE
   with finite penalty values and a violated constraint (`trial.set_constraint`, Optuna 5). TPE and NSGA-II rank
   infeasible trials below every feasible one, so the failing region stops being proposed. Plain FAIL would be
   ignored by the samplers, and NaN would leave the trial RUNNING forever.
3. Loader knobs decided by probes (tuner.search._probe): the sampler searches the rest, and each trial gets the
   loader chosen for its batch size as constants.
4. A wall-time cap per trial, from the budget and the trials so far, so one very slow config cannot hold the
   study hostage (the engine stops it and still reports its measured throughput, `capped=True`).

It uses OptunaSearch's private attributes `_ot_trials`, `_ot_study`, `_completed_trials` (checked against
ray 2.60; pyproject pins ray < 2.61).
"""

from __future__ import annotations

import logging
from typing import Any

from ray.tune.search.optuna import OptunaSearch

from tuner.config import Budget
from tuner.study.loaders import LoaderPlan
from tuner.space import Space
from tuner.search._storage import RECORD_ATTR, fail_if_running
from tuner.study import Objective, TrialRecord
from tuner.search._outcome import tell_trial, wall_limit
from tuner.search._trial import FEASIBLE_KEY, TRIAL_KEY, WALL_KEY, objective_key, record_from_payload

logger = logging.getLogger(__name__)



class SpaceFunction:
    """Define-by-run function for OptunaSearch (a picklable object: Ray saves the searcher with it)."""

    def __init__(self, space: Space, context: dict[str, Any], loaders: LoaderPlan | None = None) -> None:
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
        enqueued = _enqueued_params(getattr(trial, "ot_trial", trial))
        if any(k in enqueued for k in self.loaders.knobs):
            return {k: enqueued[k] for k in self.loaders.knobs if k in enqueued}
        return self.loaders.loader_for(drawn.get("batch_size"))


def _enqueued_params(trial: Any) -> dict[str, Any]:
    """The params an enqueued trial was asked with (Optuna keeps them in the trial's system attrs; Optuna 5 no
    longer exposes those on the Trial, so through its storage, by the trial's id)."""
    try:
        return dict(trial.storage.get_trial_system_attrs(trial._trial_id).get("fixed_params") or {})
    except (AttributeError, KeyError, TypeError):
        return {}


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
        loaders: LoaderPlan | None = None,
    ) -> None:
        self._objectives = list(objectives)
        self._budget = budget
        self._train_seconds = list(train_seconds or [])
        self._fixed_wall_limit_s = fixed_wall_limit_s
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

    def suggest(self, trial_id: str) -> dict | None:
        config = super().suggest(trial_id)
        if config is None:
            return None
        config[TRIAL_KEY] = self._ot_trials[trial_id].number
        config[WALL_KEY] = self._fixed_wall_limit_s or wall_limit(self._budget, self._train_seconds)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        return None  # one report per trial; nothing incremental to tell Optuna

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self._completed_trials or trial_id not in self._ot_trials:
            return
        ot_trial = self._ot_trials[trial_id]
        record = record_from_payload(result)
        if record is None and not error:
            # Stopped before it reported (the search was interrupted): not the config's fault, so FAIL, which
            # the samplers ignore; resume proposes a new trial in its place.
            self._fail(ot_trial)
        else:
            feasible = bool(result and result.get(FEASIBLE_KEY))
            values = None  # a failed trial: penalties and a violated constraint
            if feasible:
                values = [float(result[objective_key(o)]) for o in self._objectives]  # type: ignore[index]
            if record is None:  # the trial process raised or died: the callback records Ray's error text
                record = TrialRecord(trial=ot_trial.number, state="error", params=dict(ot_trial.params),
                                     error="the trial process failed (see the Ray error file)")
            try:
                ot_trial.set_user_attr(RECORD_ATTR, record.to_json())
                ot_trial.set_user_attr("state", record.state)
            except Exception as exc:  # never lose the tell over bookkeeping
                logger.warning("could not annotate trial %s: %s", ot_trial.number, exc)
            try:  # values, or penalties and a violated constraint (the benchmarks tell the same way)
                tell_trial(self._ot_study, ot_trial, self._objectives, values)
            except Exception as exc:  # e.g. already finished by a previous run
                logger.warning("could not tell Optuna about trial %s: %s", ot_trial.number, exc)
            seconds = record.value("train_seconds")
            if feasible and seconds is not None:
                self._train_seconds.append(seconds)
        self._completed_trials.add(trial_id)

    def _fail(self, ot_trial: Any) -> None:
        from optuna.trial import TrialState

        try:
            self._ot_study.tell(ot_trial, state=TrialState.FAIL)
        except Exception as exc:  # e.g. already finished by a previous run
            logger.warning("could not tell Optuna about trial %s: %s", ot_trial.number, exc)

    def unfinished(self) -> list[int]:
        """Numbers of trials this searcher asked for but never told (interrupted)."""
        return [t.number for tid, t in self._ot_trials.items() if tid not in self._completed_trials]

    def fail_unfinished(self) -> None:
        """Trials asked for but never told (Ctrl-C) become FAIL, so --resume runs them again."""
        for number in self.unfinished():
            fail_if_running(self._ot_study, number)

