"""Persist each trial the moment it ends (on the driver), so reports work on a study that is still running.

A search trial is recorded in one place, its searcher (tuner.search._searcher: the Optuna attributes and tell, then
result.json and its trials.csv row through tuner.search._storage.keep_record); the callback here writes no record
of a search trial, and needs the run's searcher: it brings it Ray's error text for a trial that raised or died,
keeps each trial's rung reports as the scheduler decided them (trials/NNNN/rungs.json, what --resume rebuilds the
scheduler from), gives an ended DDP trial's workers back (tuner.search._ddp) and updates the live view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune import Callback

from tuner.analysis import CSV_FIGURES
from tuner.study import StudyFolder, TrialRecord, write_rerun
from tuner.search._ddp import release_ended, release_workers
from tuner.search._protocol import final_record, order_of, record_of, rung_closed


def _rerun(trial: Any) -> bool:
    """Whether a Tune trial is a confirmation re-run (its TrialOrder has a repeat)."""
    order = order_of(trial.config)
    return order is not None and order.rerun


def ray_error_text(trial: Any) -> str:
    """Ray's error text for a trial that raised or whose process died ('' when there is none)."""
    try:  # the driver-side copy is written before callbacks run; the storage copy is synced later
        local = trial.error_file
        if local and Path(local).is_file():
            return Path(local).read_text(errors="replace")  # Ray's text: whatever bytes the trial printed
        return str(trial.get_error() or "")
    except Exception:  # the file may be gone; the record still says it failed
        return ""


def classify_ray_error(text: str) -> tuple[str, str]:
    """(state, one-line reason) from Ray's error text: the memory monitor's kill is an oom, a dead process or a
    raised exception an error."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("Failure #")]
    if "low on memory" in text or "OutOfMemoryError" in text:
        return "oom", "the trial process was killed for running out of host memory"
    if "actor died" in text or "worker process has died" in text:
        detail = next((ln for ln in lines if "Worker exit detail" in ln), "")
        detail = detail.split("Worker exit detail:", 1)[-1].split(". ")[0].strip() if detail else ""
        return "error", "the trial process died" + (f" ({detail})" if detail else "")
    pick = next((ln for ln in reversed(lines) if "Error" in ln or "Exception" in ln), lines[-1] if lines else "")
    return "error", (pick or "the trial process failed")[:500]


def error_of(trial: Any, watch: Any) -> tuple[str, str]:
    """(state, reason) of a trial that raised or died: the driver's own reason when its TrialWatch ended the
    trial's process (a limit it ran past: tuner.search._watch), else Ray's error text classified."""
    ended = watch.ended(trial) if watch is not None else None
    if ended is not None:
        return ended.state, ended.reason
    return classify_ray_error(ray_error_text(trial))


class StudyRecorder(Callback):
    """Ray's error text and the rung reports for the searcher (which records every trial), and the live view."""

    def __init__(self, study_dir: Path, view: Any = None, *, searcher: Any, scheduler: Any = None) -> None:
        self.folder = StudyFolder(Path(study_dir))  # searcher: the run's StudySearcher, which records each trial
        self.view = view
        self.searcher, self.scheduler = searcher, scheduler
        self.recorded: list[int] = []
        self.watch: Any = None  # the run's TrialWatch (tuner.search._watch): why it ended a trial's process

    def __getstate__(self) -> dict[str, Any]:  # Ray pickles the run config; the view holds a terminal
        return {**self.__dict__, "view": None, "searcher": None, "scheduler": None}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        """A rung report, once the scheduler decided on it: the trial's rung entries so far, kept beside it."""
        order = order_of(trial.config)
        if self.scheduler is None or order is None or order.rerun or rung_closed(result) is None:
            return
        from tuner.search._rungs import write_rungs

        write_rungs(self.folder, order.trial, self.scheduler)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if self.view is not None and not _rerun(trial):
            self.view.trial_started()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if self.view is not None:
            self.view.refresh()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if _rerun(trial):  # a confirmation re-run of the same Tune run: the RerunRecorder's
            return
        release_workers(trial.last_result)  # a DDP trial's workers: every way it ends gives them back
        record = record_of(trial.last_result)  # a stopped trial's last report is its rung's
        if record is None:  # stopped before it reported (interrupted): nothing measured, nothing to keep
            return
        self._shown(record)  # the searcher recorded it (Tune told it first)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        order = order_of(trial.config)
        if order is None or order.rerun:  # a re-run: the RerunRecorder's
            return
        release_workers(trial.last_result)
        state, reason = error_of(trial, self.watch)
        record = final_record(trial.last_result) or TrialRecord(
            trial=order.trial, state=state, error=reason, params=order.searched,  # type: ignore[arg-type]
            wall_limit_s=order.limits.wall_limit_s)
        if self.searcher is None or self.searcher.record_error(trial.trial_id, record) is None:
            return  # not the searcher's (None: this copy was unpickled without it)
        self._shown(record)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        # the trials Tune stopped at the run's end (Ctrl-C, SIGTERM, the allowance); re-runs: the RerunRecorder's
        release_ended([t for t in trials if not _rerun(t)])

    def _shown(self, record: TrialRecord) -> None:
        self.recorded.append(record.trial)
        if self.view is not None:
            self.view.trial_finished(record)


class RerunRecorder(Callback):
    """Records each confirmation re-run the moment it ends: beside its trial, and in the Optuna study. The search's
    trials of the same Tune run (tuner.search._phases) are the StudyRecorder's."""

    def __init__(self, study_dir: Path, storage_url: str, study_name: str, view: Any = None) -> None:
        self.folder = StudyFolder(Path(study_dir))
        self.storage_url, self.study_name = storage_url, study_name
        self.view = view
        self.recorded: list[tuple[int, int]] = []
        self.watch: Any = None  # the run's TrialWatch (tuner.search._watch)
        self._study: Any = None  # the Optuna study, loaded at the first re-run and kept for the others

    def __getstate__(self) -> dict[str, Any]:  # Ray pickles the run config into the study folder: no password
        from tuner.search._storage import kept_url

        return {**self.__dict__, "view": None, "storage_url": kept_url(self.storage_url), "_study": None}

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if not _rerun(trial):  # a search trial of the same Tune run: the StudyRecorder's
            return
        release_workers(trial.last_result)
        record = record_of(trial.last_result)
        if record is not None:
            self._record(trial, record)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if not _rerun(trial):
            return
        release_workers(trial.last_result)
        state, reason = error_of(trial, self.watch)
        self._record(trial, record_of(trial.last_result) or TrialRecord(
            trial=order_of(trial.config).trial, state=state, error=reason))  # type: ignore[arg-type, union-attr]

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        release_ended([t for t in trials if _rerun(t)])

    def _record(self, trial: Any, record: TrialRecord) -> None:
        from tuner.study import Rerun

        order = order_of(trial.config)
        repeat, round_ = int(order.repeat), order.round  # type: ignore[arg-type, union-attr]
        fields = record.model_dump()
        ran = ((record.config or {}).get("params") or {}).get("seed")  # what it trained with; else what was asked
        seed = ran if isinstance(ran, int) and not isinstance(ran, bool) else order.seed  # type: ignore[union-attr]
        rerun = Rerun.model_validate({k: v for k, v in fields.items() if k in Rerun.model_fields or
                                      k not in TrialRecord.model_fields} | {"repeat": repeat, "round": round_,
                                                                            "seed": seed})
        write_rerun(self.folder, record.trial, rerun, CSV_FIGURES)  # trials.csv's columns: the judge's
        self.recorded.append((record.trial, repeat))
        self._tell_optuna(record.trial, rerun)
        if self.view is not None:
            self.view.rerun_finished(record.trial, rerun)

    def _tell_optuna(self, number: int, rerun: Any) -> None:
        """Keep the re-runs in the Optuna study too, the record of truth on resume: a finished Optuna trial cannot
        be updated, so they are study user attributes, `confirm:<trial>` -> the trial's re-runs."""
        import optuna

        from tuner.search._storage import open_storage, rerun_attr

        try:
            if self._study is None:  # once: each load opened the database again (its schema checks: ~0.2 s)
                # open_storage: the URL as SQLAlchemy needs it (the installed PostgreSQL driver, several hosts)
                self._study = optuna.load_study(study_name=self.study_name, storage=open_storage(self.storage_url))
            study = self._study
            runs = list(study.user_attrs.get(rerun_attr(number), []))
            runs = [r for r in runs if r.get("repeat") != rerun.repeat] + [rerun.to_json()]
            study.set_user_attr(rerun_attr(number), runs)
        except Exception:  # noqa: BLE001 - the study folder already has it; never lose a re-run over this
            pass
