"""What `tuner search` accepts (`SearchOptions`, one field per option) and the validated plan made from it
(`SearchPlan`), before anything is started or written.

The plan is made in two steps, each in a module of its own: plan_search (tuner.search._plan) parses the space,
resolves defaults (the space's, or the saved study's on --resume), validates every option, checks the study name
and the dataset, and is pure: it raises a UserError or returns a SearchPlan, so bad input never starts Ray or
touches disk. check_plan (tuner.search._check) builds the workload once and sizes the budget on the pre-flight's
timings. The study's objectives, which both resolve, are tuner.search._objectives'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.config import Budget, Quality, Target
from tuner.schedule import SchedulerPlan
from tuner.space import Space
from tuner.target import TargetAsk
from tuner.study import Objective, Preflight, ProbePlan, StudyFolder, StudyMeta
from tuner.workload import WorkloadRef

SAMPLERS = ("tpe", "nsga2", "random")
STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # fullmatch: `$` would let a trailing newline in
CACHE_DIR = ".cache"
RESOURCE_OPTIONS = ("concurrency", "cpus_per_trial", "gpus_per_trial")  # kept by --resume (resources.asked)


BUSY_CHOICES = ("note", "wait", "refuse")


@dataclass
class SearchOptions:
    """What `tuner search` accepts, one field per option (`budget_seconds` is `--budget-seconds`; `tuner search
    --help` says each in full). None means "not given": the space's defaults (or the saved study's, on --resume)
    apply.

    Attributes:
        space: a bundled space's name (`amp_loader`) or a space file's path; needed unless `resume` with `study`.
        study: the study's name, its folder under `reports_dir` (default: the space's name).
        trials: how many trials, the baseline (trial 0) included.
        workload: `gan`, `cnn`, `package.module:make` or `path/to/file.py:make` (default: the space's).
        dataset: the workload's dataset (`digits`, `folder:DIR`, ...).
        workload_options: keyword arguments of the workload's factory (`--option KEY=VALUE`).
        budget_seconds: each trial's training budget in seconds (at most one of this and `budget_samples`).
        budget_samples: each trial's training budget in samples.
        sampler: `tpe`, `nsga2` or `random`.
        seed: the sampler's seed.
        concurrency: trials run at once.
        cpus_per_trial: CPUs each trial gets.
        gpus_per_trial: GPUs each trial gets.
        storage: an Optuna storage URL (PostgreSQL); default: SQLite in the study folder.
        address: a Ray cluster's address.
        reports_dir: where study folders live.
        resume: continue the study `study` names.
        verbose: show Ray's own output.
        confirm: K, the front trials re-run after the search (0: no confirmation).
        repeats: R, the re-runs of each confirmed trial and of the baseline.
        probe: decide speed-only knobs by probes before the trials.
        parity_seconds: the numerics parity check's time, at most (0: none).
        startup_trials: random trials before TPE models the results.
        wall_limit_s: a fixed per-trial wall-time cap (default: from the budget).
        scheduler: `fifo`, `asha` or `race`.
        scheduler_options: the scheduler's own options by key (asha's `min_budget` and `eta`, the race's
            `margin`; each scheduler declares its own, tuner.schedule.scheduler_options).
        study_seconds: this call's wall-time allowance for the whole study.
        busy: a busy machine: `note` it, `wait` for a quiet one, or `refuse` to start.
        busy_wait_seconds: the longest `busy="wait"` waits each time.
        target: time to this quality, or `"baseline"`.
        eval_every_samples: with a target, the samples between evaluations (default: from the measured pace).
        target_seeds: with `target="baseline"`, the seeds of the baseline's reference run the target is read from
            (the median of what each settles at; default tuner.target.TARGET_SEEDS, 3).
        objectives: the study's objectives (`--objective`), over the space's.
        horizon: after the confirmation, re-train the pick and the baseline to this horizon (`--horizon`: `2m`,
            `50000samples`; tuner.config.parse_horizon) and say whether the speed-up holds there; kept by --resume.
        horizon_seeds: seeds of each side for `horizon` (default 3, as `tuner export --horizon`'s).
    """

    space: str | None = None
    study: str | None = None
    trials: int | None = None
    workload: str | None = None
    dataset: str | None = None
    workload_options: dict[str, Any] | None = None  # keyword arguments of the workload factory
    budget_seconds: float | None = None
    budget_samples: int | None = None
    sampler: str | None = None
    seed: int | None = None
    concurrency: int | None = None
    cpus_per_trial: float | None = None
    gpus_per_trial: float | None = None
    storage: str | None = None
    address: str | None = None
    reports_dir: Path = Path("reports")
    resume: bool = False
    verbose: bool = False
    confirm: int | None = None  # K: front trials re-run after the search (0: no confirmation)
    repeats: int | None = None  # R: re-runs of each confirmed trial and of the baseline
    probe: bool = True  # decide speed knobs, parity-passed numerics and an exact split by probes (tuner.search._probe)
    parity_seconds: float | None = None  # the study's numerics parity check, at most (tuner.parity; 0: none)
    startup_trials: int | None = None  # random trials before TPE models (default: about a third, 3..10)
    wall_limit_s: float | None = None  # fixed per-trial training wall cap (default: from the budget, see searcher)
    scheduler: str | None = None  # fifo (every trial its whole budget) or asha (tuner.search._rungs); default fifo
    # The scheduler's own options by key (tuner.schedule.scheduler_options: asha's min_budget and eta, the race's
    # margin; each scheduler declares its own), None or absent where not given
    scheduler_options: dict[str, float | None] = field(default_factory=dict)
    study_seconds: float | None = None  # this invocation's wall-time allowance (tuner.search._allowance)
    # A busy machine (tuner.search._busy): note it (say so, measure on), wait for it to be quiet before the study and
    # each trial (at most busy_wait_seconds each), or refuse to start
    busy: str = "note"
    busy_wait_seconds: float = 120.0
    target: float | str | None = None  # time to this quality (issue 34), or "baseline"; the space's unless given
    eval_every_samples: int | None = None  # with a target: K, the samples between evaluations (default: from the pace)
    target_seeds: int | None = None  # --target-seeds: seeds a derived target is read from (default TARGET_SEEDS)
    objectives: tuple[str, ...] | None = None  # --objective: the study's objectives, over the space's objectives:
    horizon: str | None = None  # --horizon DURATION: the horizon check after the confirmation (issue 51, item 6)
    horizon_seeds: int | None = None  # --horizon-seeds: its seeds of each side (default HORIZON_SEEDS)


@dataclass(frozen=True)
class SearchPlan:
    """Validated, resolved settings. Nothing has been created yet.

    Frozen, so the budget reads in one direction: plan_search makes it from the options, check_plan makes the one
    the trials run (the budget the pre-flight sized, its rungs, the objectives resolved) before any TrialOrder
    exists, and what the runner learns later (the kept loaders, the probes' count of trials, a derived target) is a
    new plan (dataclasses.replace). The budget study.json keeps is the one every trial gets."""

    study: str
    folder: StudyFolder
    reports_dir: Path
    storage: str
    space: Space
    objectives: list[Objective]  # as declared; `quality` is resolved by check_plan
    workload: WorkloadRef
    workload_options: dict[str, Any]
    dataset: str | None
    budget: Budget
    trials: int
    sampler: str
    seed: int
    resume: bool
    options: SearchOptions
    confirm_trials: int = 0
    confirm_repeats: int = 0
    meta: StudyMeta | None = None  # the saved study.json on --resume
    loaders: ProbePlan | None = None  # the saved probes.json on --resume (tuner.search._probe)
    own: dict[str, float] = field(default_factory=dict)  # the workload's own lr/betas (check_plan): the baseline's
    scheduler: SchedulerPlan = field(default_factory=SchedulerPlan)  # fifo, or asha with its rungs
    # The pre-flight's timings on the trials' device (check_plan; study.json's on --resume): the trials' budget keys.
    preflight: Preflight = field(default_factory=Preflight)
    sized: str | None = None  # the one line saying check_plan raised the space's default budget (None: it did not)
    heavy_note: str | None = None  # the one line saying the space's slowest step does not fit the budget (None: it does)
    batch_note: str | None = None  # the one line saying the micro-batch split changes what is learned (batch statistics)
    eval_note: str | None = None  # the one line saying K was lowered so a derived target is read from enough evaluations
    optimizer_note: str | None = None  # the line saying a bundled space's knobs the workload's optimizer lacks are left out
    target_note: str | None = None  # the line saying a derived target is where the baseline started (flat_reference)

    optuna_study: str | None = None  # the study's name in its database, when the folder was renamed since
    # With --study-seconds and no --trials, `trials` is the allowance's cap (MAX_TRIALS) and study.json keeps this.
    kept_trials: int | None = None
    preflight_s: float | None = None  # one trial's wall time as the pre-flight estimates it (check_plan)
    target: Target | None = None  # the study's target (check_plan resolves it; study.json's on --resume)
    target_ask: TargetAsk | None = None  # a new study's target as asked, checked before the pre-flight (plan_target)
    # The horizon check to run after the confirmation, as study.json keeps it: {"budget": {"seconds": 120},
    # "seeds": 3} (None: none asked; --resume keeps the saved one unless --horizon is given again)
    horizon: dict[str, Any] | None = None

    @property
    def optuna_name(self) -> str:
        return self.optuna_study or self.study

    @property
    def study_dir(self) -> Path:
        return self.folder.path

    @property
    def cache_dir(self) -> Path:
        return self.reports_dir / CACHE_DIR

    def quality_settings(self) -> Quality:
        return Quality.model_validate(self.space.trial.get("quality") or {})


def trial_base(plan: SearchPlan, gpus: int, device: str) -> dict[str, Any]:
    """What every trial's config shares (the space adds its `trial:` section, the sampler the knobs)."""
    return {"workload": plan.workload.text, "workload_options": plan.workload_options, "dataset": plan.dataset,
            "budget": plan.budget.model_dump(exclude_none=True), "gpus": gpus, "params": {"device": device},
            "target": plan.target.model_dump() if plan.target is not None else None}
