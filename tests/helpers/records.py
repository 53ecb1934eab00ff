"""A trial's record written the way `tuner search` writes it: through tuner.study's writer, with trials.csv's
derived columns from tuner.analysis (tuner.search._storage.keep_record / keep_rerun do the same)."""

from __future__ import annotations

from pathlib import Path

from tuner import study
from tuner.analysis import CSV_FIGURES
from tuner.study import Rerun, StudyFolder, TrialRecord


def write_record(folder: StudyFolder, record: TrialRecord) -> Path:
    return study.write_record(folder, record, CSV_FIGURES)


def write_rerun(folder: StudyFolder, trial: int, rerun: Rerun) -> Path:
    return study.write_rerun(folder, trial, rerun, CSV_FIGURES)


def write_csv(folder: StudyFolder) -> Path:
    return study.write_csv(folder, CSV_FIGURES)
