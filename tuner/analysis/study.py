"""A study read back from disk with its Pareto ranks: what the search summary, `tuner report` and `tuner export`
start from."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import StudyError
from tuner.study import (
    STUDY_META, Objective, ProbePlan, StudyFolder, StudyMeta, TrialRecord, budget_unit, measured_at_text,
    param_columns, quality_objective, ranges,
)
from tuner.analysis.pareto import Value, pareto_ranks
from tuner.analysis.rounds import in_baseline_units
from tuner.analysis.trials import read_records
from tuner.analysis.stats import NoiseFloor, Pooled
from tuner.analysis.suspect import reads_windows

if TYPE_CHECKING:
    from tuner.config import Target
    from tuner.study import Metric


def confirmed_or_measured(record: TrialRecord, metric: str) -> float | None:
    if record.confirmed is not None:
        fig = record.confirmed.figures.get(metric)
        if fig is not None:
            return fig.centre
    return record.value(metric)


@dataclass
class Study:
    folder: StudyFolder
    meta: StudyMeta
    records: list[TrialRecord]
    ranks: dict[int, int] = field(default_factory=dict)
    strays: list[Path] = field(default_factory=list)  # what trials/ holds that is not the study's (never read)

    @classmethod
    def load(cls, folder: StudyFolder) -> "Study":
        return cls.judged(folder, folder.read_meta(), read_records(folder), strays=folder.strays())

    @classmethod
    def judged(cls, folder: StudyFolder, meta: StudyMeta, records: list[TrialRecord],
               strays: list[Path] | None = None) -> "Study":
        """A study of `records` as `load` reads one: confirmed intervals pooled, Pareto ranks set (records held in
        memory, as tuner.analysis.whatif's, are judged as a folder's are)."""
        study = cls(folder, meta, records, strays=list(strays or []))
        study._pool_confirmed()
        study.ranks = pareto_ranks(records, study.objectives, study.value)
        return study

    def _pool_confirmed(self) -> None:
        """Each confirmed figure's interval, from the run-to-run variation pooled over all confirmed trials (and,
        for a figure read in several rounds, the spread between its rounds: tuner.analysis.stats.Pooled.across)."""
        from tuner.analysis.stats import pool

        confirmed = [r.confirmed for r in self.records if r.confirmed is not None]
        for key in {k for c in confirmed for k in c.figures}:
            clear = pool(self.noise_groups(key))
            # a trial whose re-runs stay suspect is judged with its own disagreement in the noise, not the clear
            # ones' alone (which gave re-runs of 120.9 and 1068.8 an interval of 287-451)
            spread = pool([g for c in confirmed if key in c.figures for g in c.groups(key)])
            # across rounds where it was read in several; a to-target figure (runs set) keeps its own interval
            for c in confirmed:
                pooled = spread if c.suspect is not None and reads_windows(key) else clear
                if key in c.figures and pooled is not None and c.figures[key].runs is None:
                    iv = pooled.across(c.groups(key))
                    one = pooled.across(c.groups(key), one_more=True)
                    c.figures[key] = c.figures[key].model_copy(update={"low": iv.low, "high": iv.high,
                                                                       "rerun_low": one.low, "rerun_high": one.high})

    def noise_groups(self, metric: str) -> list[list[float]]:
        """The confirmed trials' re-runs of `metric`, grouped by trial and round: what the study's run-to-run noise
        is pooled from. Re-runs that did not clear a suspect reading (windows far apart: the machine was disturbed)
        are left out of a figure read from the windows while others are clear: one such trial (re-runs 120.9 and 1068.8) made a default study's noise
        floor 197% and left its baseline, whose re-runs read 790.3 and 818.9, without an interval."""
        confirmed = [r.confirmed for r in self.records if r.confirmed is not None and metric in r.confirmed.figures]
        clear = [c for c in confirmed if c.suspect is None or not reads_windows(metric)] or confirmed
        return [g for c in clear for g in c.groups(metric)]

    def pooled(self, metric: str) -> "Pooled | None":
        from tuner.analysis.stats import pool

        return pool(self.noise_groups(metric))

    @property
    def name(self) -> str:
        return self.meta.name or self.folder.name

    @property
    def dir(self) -> Path:
        return self.folder.path

    @property
    def objectives(self) -> list[Objective]:
        return list(self.meta.objectives)

    @property
    def quality(self) -> Objective | None:
        return quality_objective(self.objectives)

    @property
    def value(self) -> Value:
        """The figure trials are ranked, drawn and picked by: the confirmed centre where the confirmation phase
        re-ran the trial, what it measured otherwise; a throughput read in another phase than the baseline's first
        confirmation round rescaled by the baseline's drift between the two (tuner.analysis.rounds), so the table,
        the front and the pick all compare each trial by its ratio to the baseline read beside it (a 2x drift
        between rounds had the table rank a 1.0x trial over the pick's 1.51x)."""
        return in_baseline_units(self.records, self.baseline_trial, confirmed_or_measured)

    def drift_adjusted(self, metric: str) -> bool:
        """Whether `value` moved some trial's `metric` off the figure it read: the views then show both, and say
        which one ranks."""
        value = self.value
        for r in self.records:
            a, b = value(r, metric), confirmed_or_measured(r, metric)
            if a is not None and b is not None and not math.isclose(a, b, rel_tol=1e-9):
                return True
        return False

    def ranked_on(self) -> dict[str, str]:
        """What each objective's ranked figure is, in words: the table's caption, the HTML's and the JSON's."""
        out: dict[str, str] = {}
        for o in self.objectives:
            if self.drift_adjusted(o.metric):
                out[o.metric] = (f"{o.metric} adjusted for the machine's drift between phases: each trial's reading "
                                 f"over the baseline's (trial {self.baseline_trial}) read in the same round, in the "
                                 f"baseline's first confirmation round's units (the figure the pick ranks by; "
                                 f"'read' is the raw figure)")
            else:
                out[o.metric] = f"{o.metric}: the mean of the re-runs where confirmed, the search's reading otherwise"
        return out

    def baseline_value(self, metric: str) -> float | None:
        """The baseline's ranked figure (None without a baseline): what a trial's ratio in the views is against."""
        base = next((r for r in self.records if r.trial == self.baseline_trial), None)
        return self.value(base, metric) if base is not None else None

    @property
    def baseline_trial(self) -> int | None:
        """The trial that ran tuner's default knobs (trial 0 of a study that has one, unless a kill or an
        interrupt stopped it and --resume ran it under a later number). A recorded trial whose knobs are not the
        baseline's (a study resumed by an older tuner that sampled in its place) is never called the baseline."""
        raw = (self.meta.baseline or {}).get("trial")
        if raw is None:
            return None
        want = (self.meta.baseline or {}).get("params") or {}
        record = next((r for r in self.records if r.trial == int(raw)), None)
        if record is not None and any(record.params[k] != v for k, v in want.items() if k in record.params):
            return None
        return int(raw)

    def loader_plan(self) -> "ProbePlan | None":
        """The loader knobs the study's probes chose per batch size (probes.json), when it probed."""
        path = self.folder.probes_path
        if not path.is_file():
            return None
        try:
            return ProbePlan.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            return None

    def noise(self) -> "NoiseFloor | None":
        """The run-to-run variation of one config, from the confirmed trials' re-runs."""
        from tuner.analysis.stats import noise_floor

        return noise_floor(self.noise_groups("throughput"))

    def params(self) -> list[str]:
        return param_columns(self.meta, self.records)

    def rank(self, record: TrialRecord) -> int | None:
        return self.ranks.get(record.trial)

    def front(self) -> list[TrialRecord]:
        return [r for r in self.records if self.rank(r) == 0]

    def state_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.records:
            counts[r.state] = counts.get(r.state, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def scheduled(self) -> bool:
        """Whether a rung scheduler ran this study (its records say at which rung and budget they were measured)."""
        return any(r.rung is not None or r.measured_at is not None for r in self.records)

    @property
    def target(self) -> "Target | None":
        """The study's target quality (issue 34; study.json's `target`, with how it was set), None without one."""
        from tuner.config import Target

        raw = getattr(self.meta, "target", None)
        return Target.model_validate(raw) if isinstance(raw, dict) else None

    def table_columns(self) -> "list[Metric]":
        """The metric list's table columns this study shows: the target's (TARGET_COLUMNS) only with a target."""
        from tuner.study import TARGET_COLUMNS, table_columns

        return [m for m in table_columns() if self.target is not None or m.key not in TARGET_COLUMNS]

    def target_text(self, record: TrialRecord | None = None) -> str | None:
        """`target: val_loss <= 1.6 (--target), evaluated every 1,600 samples; reached by 3 of 5 measured trials`,
        or with `record` what that trial did: `...: reached in 4.1 s of training, 2,048 samples`."""
        t = self.target
        if t is None:
            return None
        from tuner.target import derived_how

        # a derived target says how it was read: each seed's settled quality, their median and spread (issue 51)
        how = derived_how(t) if t.source == "baseline" and t.evaluations else t.source or "given"
        if t.value is None:  # a derivation cut short (issue 51: "not set yet" after the study had ended)
            return (f"target: not set (the baseline's reference run read no {t.metric}), so no trial has a time to "
                    f"target; give --target VALUE")
        head = f"target: {t.describe()} ({how}), evaluated every {t.eval_every_samples:,} samples"
        if record is not None:
            ttt, n = record.value("time_to_target"), record.value("samples_to_target")
            return head + (f": reached in {ttt:.3g} s of training, {n:,.0f} samples" if ttt is not None and n
                           is not None else ": not reached within its budget")
        measured = [r for r in self.records if r.complete]
        reached = sum(1 for r in measured if r.value("time_to_target") is not None)
        return head + f"; reached by {reached} of {len(measured)} measured trials"

    @property
    def budget_unit(self) -> str:
        return budget_unit(self.meta.budget)

    def measured_at(self, record: TrialRecord) -> str:
        """`rung 2, 45 s`: the budget a trial's figures were taken at; "" without a scheduler."""
        return measured_at_text(record, self.budget_unit)

    def sorted_records(self) -> list[TrialRecord]:
        """Ranked trials by rank then throughput (fastest first), then unranked complete trials, then trials a
        scheduler stopped (highest rung first: never ranked against the complete ones), then failures."""

        def key(r: TrialRecord) -> tuple[float, ...]:
            rank = self.rank(r)
            thr = self.value(r, "throughput")
            group = 0 if rank is not None else (1 if r.complete else 2 if r.state == "stopped" else 3)
            return (group, rank if rank is not None else -(r.rung or 0) if group == 2 else 0,
                    -(thr if thr is not None else -math.inf) if group < 3 else 0, r.trial)

        return sorted(self.records, key=key)

    def trial(self, number: int) -> TrialRecord:
        for r in self.records:
            if r.trial == number:
                return r
        if not self.records:
            raise StudyError(f"no trial {number} in study '{self.name}': it has no finished trials yet")
        raise StudyError(f"no trial {number} in study '{self.name}'; its trials are "
                         f"{ranges([r.trial for r in self.records])}")

    def strays_note(self) -> str | None:
        """One line naming what trials/ holds that the study did not write (left out of every view), or None."""
        if not self.strays:
            return None
        names = ", ".join(f"{p.name}/" if p.is_dir() else p.name for p in self.strays[:5])
        more = f" and {len(self.strays) - 5} more" if len(self.strays) > 5 else ""
        return (f"{self.dir / 'trials'} also holds {names}{more}, not named as this study names its trials "
                f"(NNNN): left out (a copy of a trial is never read as one); move it out of the study folder")

    def require_complete(self) -> None:
        if not self.ranks:
            have = ", ".join(f"{n} {s}" for s, n in self.state_counts().items()) or "no finished trials"
            raise StudyError(f"study '{self.name}' has no complete trial with finite objectives ({have}); run more "
                             f"trials with `tuner search` before reporting a best config")

    def sample_grid(self, record: TrialRecord) -> Path | None:
        """The trial's sample grid path, absolute or relative to the study folder; None if it has none."""
        if not record.sample_grid:
            return None
        path = Path(record.sample_grid)
        return path if path.is_absolute() else self.dir / path


def known_studies(reports_dir: Path) -> list[str]:
    if not Path(reports_dir).is_dir():
        return []
    return sorted(p.parent.name for p in Path(reports_dir).glob(f"*/{STUDY_META}"))


def open_study(reports_dir: Path, name: str) -> Study:
    """Read `<reports_dir>/<name>/`; an unknown name is a StudyError listing the studies that exist. `name` must
    name a folder directly in the reports dir: report and export write into the study's folder, and a path
    elsewhere (`/other/study`, `../x`) would have them write outside the folder the user named."""
    reports_dir = Path(reports_dir)
    inside = Path(os.path.normpath(os.path.abspath(reports_dir)))
    path = Path(os.path.normpath(os.path.abspath(reports_dir / name)))  # lexical: a symlinked study folder is fine
    if path.parent != inside or not name.isprintable():
        # Suggest a --reports-dir only where the study is: the name read against --reports-dir, then as a path
        # from here (`reports/x` with the default --reports-dir reports means ./reports/x, not reports/reports/x).
        held = next((p for p in (path, Path(os.path.normpath(os.path.abspath(name))))
                     if name.isprintable() and StudyFolder(p).exists()), None)
        if held is not None:
            fix = f"the study's name and the folder that holds it: {held.name} --reports-dir {held.parent}"
        elif name.isprintable():
            fix = f"the study's name, a folder in --reports-dir (there is no study at {path})"
        else:
            fix = "the study's name as its folder is named (no control characters)"
        raise StudyError(f"study {name!r} is not a folder in --reports-dir {reports_dir}; give {fix}")
    folder = StudyFolder(reports_dir / name)
    if not folder.exists():
        known = known_studies(reports_dir)
        if known:
            raise StudyError(f"no study '{name}' in {reports_dir}/; known: {', '.join(known)}")
        raise StudyError(f"no study '{name}' in {reports_dir}/; it has no studies (run `tuner search` or pass "
                         f"--reports-dir)")
    return Study.load(folder)
