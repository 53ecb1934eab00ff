"""Persist each trial the moment it ends (on the driver), so reports work on a study that is still running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune import Callback

from tuner.study import StudyFolder, TrialRecord
from tuner.search.trainable import TRIAL_KEY, record_from_payload, searched_params


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


class StudyRecorder(Callback):
    """record_trial() for every finished trial, and the live view's updates."""

    def __init__(self, study_dir: Path, view: Any = None) -> None:
        self.folder = StudyFolder(Path(study_dir))
        self.view = view
        self.recorded: list[int] = []

    def __getstate__(self) -> dict[str, Any]:  # Ray pickles the run config; the view holds a terminal
        return {**self.__dict__, "view": None}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if self.view is not None:
            self.view.trial_started()

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if self.view is not None:
            self.view.refresh()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        record = record_from_payload(trial.last_result)
        if record is None:  # stopped before it reported (interrupted): nothing measured, nothing to keep
            return
        self._record(record)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        number = trial.config.get(TRIAL_KEY)
        if number is None:
            return
        state, reason = classify_ray_error(ray_error_text(trial))
        record = record_from_payload(trial.last_result) or TrialRecord(
            trial=int(number), state=state, error=reason, params=searched_params(trial.config))
        self._record(record)

    def _record(self, record: TrialRecord) -> None:
        self.folder.write_record(record)
        self.recorded.append(record.trial)
        if self.view is not None:
            self.view.trial_finished(record)
