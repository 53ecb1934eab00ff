"""A study's trials as its views read them: the recorded trials (tuner.study's folder) with what is derived from
them when they are read: confirmed figures from the re-runs, ceilings from the study's cache, the `suspect` flags
against the study's window noise, efficiency and goodput against the baseline.

The folder stores and reads; this module judges. trials.csv carries the derived columns, so its writer
(tuner.study.writer: `write_record`, `write_rerun`) takes them from `CSV_FIGURES`; nothing here writes."""

from __future__ import annotations

from tuner.analysis.goodput import add_goodput, baseline_record
from tuner.analysis.headroom import NOT_MEASURED, fill_from_cache
from tuner.analysis.stats import confirmed
from tuner.analysis.suspect import cleared, flag, reason, window_noise
from tuner.study import CONFIRM_DIR, Rerun, StudyFolder, StudyMeta, TrialRecord


def read_records(folder: StudyFolder) -> list[TrialRecord]:
    """Every persisted trial, by number, with its derived figures. A file that does not read as a record is a
    StudyError naming it."""
    out = folder.read_trials()
    target = getattr(folder.read_meta(), "target", None) if folder.meta_path.is_file() else None
    cap = target.get("cap_seconds") if isinstance(target, dict) else None  # a not-reached run counts at it
    for record, reruns in out:
        if reruns:
            record.confirmed = confirmed(reruns, cap)
    _cached_ceilings(folder, [r for r, _ in out])
    for record, reruns in out:  # a confirmed trial's re-runs did measure: their reason stands for the note
        why = next((rr.get("ceiling_skipped") for rr in reruns if rr.get("ceiling_skipped")), None)
        if why and record.get("ceiling_skipped") == NOT_MEASURED:
            record.metrics["ceiling_skipped"] = f"in its confirmation re-runs: {why}"
    found = sorted(_flag_suspects(out), key=lambda r: r.trial)
    if folder.meta_path.is_file():  # efficiency and goodput against the baseline's noise scale (analysis.goodput)
        add_goodput(found, baseline_record(folder.read_meta().baseline, found))
    return found


class CsvFigures:
    """trials.csv's derived columns, for tuner.study's writer (tuner.study.writer.Figures)."""

    def records(self, folder: StudyFolder) -> list[TrialRecord]:
        return read_records(folder)

    def row(self, folder: StudyFolder, meta: StudyMeta, record: TrialRecord) -> TrialRecord:
        """One trial's row against the window noise the re-runs so far give (as a rebuilt trials.csv judges every
        row) and the baseline's record."""
        reruns = [rr for n, d in folder.trial_dirs() if (d / CONFIRM_DIR).is_dir() for rr in folder.reruns(n)]
        row = record.model_copy(deep=True)
        flag(row, window_noise(reruns))
        base = _baseline_file(folder, meta, row)
        add_goodput([row], baseline_record(meta.baseline, [base]) if base is not None else None)
        return row


CSV_FIGURES = CsvFigures()


def _baseline_file(folder: StudyFolder, meta: StudyMeta, record: TrialRecord) -> TrialRecord | None:
    """The baseline's record for one trial's trials.csv row: the trial itself, or read from its file (None when
    absent or unreadable: its row then shows no goodput until trials.csv is rebuilt)."""
    raw = (meta.baseline or {}).get("trial")
    if raw is None or int(raw) == record.trial:
        return record if raw is not None else None
    return folder.read_record(int(raw))


def _cached_ceilings(folder: StudyFolder, found: list[TrialRecord]) -> None:
    """Ceilings a trial did not measure itself (a search trial does not: only the trials whose verdict is
    read do), from the ones the study measured for the same knobs (ceilings.json)."""
    if not any(r.complete and r.get("compute_ceiling") is None for r in found):
        return
    fill_from_cache(found, folder.read_ceilings())


def _flag_suspects(loaded: list[tuple[TrialRecord, list[Rerun]]]) -> list[TrialRecord]:
    """Every record's `suspect` flag against the study's window noise (its re-runs'), and whether its re-runs clear
    it."""
    noise = window_noise(rr for _, reruns in loaded for rr in reruns)
    for record, reruns in loaded:
        flag(record, noise)
        if record.confirmed is not None and not cleared(list(reruns), noise):
            ok = [r for r in reruns if r.complete]
            record.confirmed.suspect = next((why for r in ok if (why := reason(r, noise))), None) \
                or "no complete re-run"
    return [r for r, _ in loaded]
