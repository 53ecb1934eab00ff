"""The one writer of a study's record: a trial's result.json and its trials.csv row, a re-run beside its trial, and
trials.csv rebuilt.

trials.csv carries figures derived when the record is read (the `suspect` flags against the study's window noise,
efficiency and goodput against the baseline): those are the judge's (tuner.analysis, above this package), so the
writer takes them from the `Figures` its caller passes (tuner.analysis.CSV_FIGURES). The study writes; the judge
only reads and derives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tuner.study.folder import StudyFolder
from tuner.study.meta import StudyMeta
from tuner.study.record import Rerun, TrialRecord


class Figures(Protocol):
    """What trials.csv shows beside the record: its rows with the figures derived from the whole study."""

    def records(self, folder: StudyFolder) -> list[TrialRecord]:
        """Every record of the study with its derived figures: trials.csv rebuilt."""

    def row(self, folder: StudyFolder, meta: StudyMeta, record: TrialRecord) -> TrialRecord:
        """One record's row, its figures derived against what the folder holds now (the re-runs so far, the
        baseline's record)."""


def write_csv(folder: StudyFolder, figures: Figures) -> Path:
    """trials.csv rebuilt from every record."""
    return folder.write_csv(figures.records(folder))


def write_record(folder: StudyFolder, record: TrialRecord, figures: Figures) -> Path:
    """Persist one finished trial (result.json) and put its row in trials.csv; returns result.json's path."""
    path = folder.write_result(record)
    write_csv_row(folder, record, figures)
    return path


def write_rerun(folder: StudyFolder, trial: int, rerun: Rerun, figures: Figures) -> Path:
    """One re-run beside its trial; trials.csv is refreshed, since the re-runs move the noise floor the `suspect`
    column is judged by."""
    path = folder.write_rerun(trial, rerun)
    if folder.meta_path.is_file():
        write_csv(folder, figures)
    return path


def write_csv_row(folder: StudyFolder, record: TrialRecord, figures: Figures) -> Path:
    """trials.csv with this trial's row added or replaced, the others kept as they are (a long study does not read
    every record back at every trial); rebuilt from every record when there is no file yet or its header lacks a
    column this record needs."""
    meta = folder.read_meta()
    if not folder.csv_path.is_file():
        return write_csv(folder, figures)
    if not folder.write_csv_row(figures.row(folder, meta, record), folder.csv_columns(meta, [record])):
        return write_csv(folder, figures)
    return folder.csv_path
