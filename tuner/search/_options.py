"""What `tuner search` accepts and the validated plan made from it, before anything is started or written.

plan_search() parses the space, resolves defaults (the space's, or the saved study's on --resume), validates
every option, checks the study name and the dataset. It is pure: it raises a UserError or returns a SearchPlan,
so bad input never starts Ray or touches disk.
Over 550 lines because every option of `tuner search` is checked here: the space, the saved study, the budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuner.config import (HORIZON_SEEDS, Budget, Quality, Target, budget_from_options, check_horizon_longer,
                          parse_horizon)
from tuner.errors import ConfigError, StudyError
from tuner.knobs import heavy_knobs, hyperparameter_knobs, knob
from tuner.search._allowance import MAX_TRIALS, check_seconds, preflight_trial_s
from tuner.search._confirm import DEFAULT_REPEATS, DEFAULT_TARGET_REPEATS, DEFAULT_TRIALS
from tuner.schedule import SchedulerPlan, plan_scheduler, saved_scheduler, scheduler_options
from tuner.space import Space, load_space, parse_space
from tuner.target import TargetAsk, check_resumed_target, check_target_evaluations, plan_target, study_target
from tuner.search._storage import (check_storage_url, check_study_database, check_study_files, default_storage,
                                   resolve_storage, saved_url, shown_url, storage_has_study)
from tuner.study import (BY_KEY, LOCK_FILE, METRICS, QUALITY, Objective, Preflight, ProbePlan, SizedBudget,
                         StudyFolder, StudyMeta)
from tuner.builtin import resolve_workload
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


def plan_search(opts: SearchOptions) -> SearchPlan:
    """Validate everything that can be validated without Ray or side effects.

    Args:
        opts: what `tuner search` was given.

    Returns:
        The resolved plan: the space, workload, budget, objectives and study folder the search would use.

    Raises:
        tuner.errors.ConfigError: an option, the space or the workload is not usable (the message is one line).
        tuner.errors.StudyError: the study exists and `resume` was not given, or cannot be resumed as asked.
    """
    reports_dir = Path(opts.reports_dir).expanduser().resolve()
    _check_numbers(opts)
    if opts.sampler is not None and opts.sampler not in SAMPLERS:
        raise ConfigError(f"unknown sampler {opts.sampler!r}; use one of {', '.join(SAMPLERS)}")
    given_ref = resolve_workload(opts.workload) if opts.workload is not None else None
    if opts.space is None and not (opts.resume and opts.study):
        raise ConfigError("give --space NAME|PATH (or --study NAME --resume to continue a study)")
    given_space = load_space(opts.space) if opts.space is not None else None
    study = opts.study or (given_space.name if given_space else "")
    if not STUDY_NAME.fullmatch(study):
        raise ConfigError(f"study name {study!r} must be letters, digits, '_', '-' or '.' (at most 100); "
                          f"pass --study NAME")
    folder = StudyFolder(reports_dir / study)
    if opts.resume:
        return _plan_resume(opts, given_space, study, folder, reports_dir)

    if folder.path.exists() and any(p.name != LOCK_FILE for p in folder.path.iterdir()):
        what = "already exists" if folder.exists() else "is a folder that is not empty"
        raise StudyError(f"study '{study}' {what} at {folder.path}; add --resume to continue it, or pick another "
                         f"name with --study NEW_NAME")
    assert given_space is not None
    storage = opts.storage or default_storage(folder.path)
    if opts.storage:
        check_storage_url(opts.storage)
    if opts.storage and storage_has_study(storage, study):
        raise StudyError(f"study '{study}' already exists in storage {shown_url(opts.storage)}; add --resume to "
                         f"continue it, or pick another name with --study NEW_NAME")
    space = given_space
    default_ref = resolve_workload(space.defaults.workload, base=Path(space.source).parent if space.source else None)
    ref = given_ref or default_ref
    # The space's dataset and options go with its own workload; another workload brings its own data.
    same = ref.text == default_ref.text
    dataset = opts.dataset if opts.dataset is not None else (space.defaults.dataset if same else None)
    options = {**(space.defaults.workload_options if same else {}), **(opts.workload_options or {})}
    objectives = study_objectives(space, ref.text, Objective(metric=QUALITY), opts.objectives)
    _check_quality(space, objectives)
    budget = _budget(opts) or space.defaults.budget
    plan = SearchPlan(
        study=study, folder=folder, reports_dir=reports_dir, storage=storage, space=space,
        objectives=objectives, workload=ref, workload_options=options, dataset=dataset,
        budget=budget, trials=opts.trials or (MAX_TRIALS if opts.study_seconds else space.defaults.trials),
        kept_trials=space.defaults.trials if opts.study_seconds and not opts.trials else None,
        sampler=opts.sampler or "tpe", seed=opts.seed if opts.seed is not None else 0, resume=False, options=opts,
        confirm_trials=_pick(opts.confirm, None, DEFAULT_TRIALS),
        confirm_repeats=_pick(opts.repeats, None, DEFAULT_TARGET_REPEATS if opts.target is not None or
                              space.target is not None else DEFAULT_REPEATS),
        scheduler=plan_scheduler(opts.scheduler, budget, opts.scheduler_options,
                                 target=opts.target is not None or space.target is not None),
    )
    # Before the pre-flight (check_plan) builds the reports folder's .cache: a bad target or K changes nothing on disk.
    return replace(plan, target_ask=plan_target(plan), horizon=plan_horizon_option(opts, None, budget))


def _check_numbers(opts: SearchOptions) -> None:
    def positive(name: str, value: float | None) -> None:
        if value is not None and not value > 0:
            raise ConfigError(f"{name} must be > 0 (got {value:g})")

    positive("--trials", opts.trials)
    positive("--budget-seconds", opts.budget_seconds)
    positive("--budget-samples", opts.budget_samples)
    positive("--concurrency", opts.concurrency)
    positive("--cpus-per-trial", opts.cpus_per_trial)
    positive("startup_trials", opts.startup_trials)
    positive("--repeats", opts.repeats)
    if opts.confirm is not None and opts.confirm < 0:
        raise ConfigError(f"--confirm must be >= 0 (got {opts.confirm}); 0 turns the confirmation phase off")
    positive("wall_limit_s", opts.wall_limit_s)
    check_seconds(opts.study_seconds)
    if opts.busy not in BUSY_CHOICES:
        raise ConfigError(f"--busy must be one of {', '.join(BUSY_CHOICES)} (got {opts.busy!r}): note says so and "
                          f"measures on, wait waits for a quiet machine, refuse stops before the study")
    if not opts.busy_wait_seconds > 0:
        raise ConfigError(f"--busy-wait-seconds must be > 0 (got {opts.busy_wait_seconds:g})")
    if opts.parity_seconds is not None and not opts.parity_seconds >= 0:
        raise ConfigError(f"--parity-seconds must be >= 0 (got {opts.parity_seconds:g}); 0 leaves the numerics "
                          f"knobs to the trials' quality without a parity check")
    if opts.budget_seconds is not None and opts.budget_samples is not None:
        raise ConfigError("give at most one of --budget-seconds and --budget-samples")
    if opts.seed is not None and opts.seed < 0:
        raise ConfigError(f"--seed must be >= 0 (got {opts.seed})")
    if opts.gpus_per_trial is not None:
        g = opts.gpus_per_trial
        if g < 0:
            raise ConfigError(f"--gpus-per-trial must be >= 0 (got {g:g})")
        if g > 1 and g != int(g):
            raise ConfigError(f"--gpus-per-trial above 1 must be a whole number (got {g:g}): DDP runs one "
                              f"worker per GPU")


def _budget(opts: SearchOptions) -> Budget | None:
    return budget_from_options(opts.budget_seconds, opts.budget_samples)


def _check_quality(space: Space, objectives: list[Objective]) -> None:
    """A quality objective needs quality scoring on; Inception FID needs its weights on disk (never downloaded)."""
    quality = Quality.model_validate(space.trial.get("quality") or {})
    wanted = [o.metric for o in objectives if is_quality_metric(o.metric)]
    if wanted and not quality.enabled:
        raise ConfigError(f"{space.source}: trial.quality.enabled: false, but the objectives need "
                          f"{', '.join(wanted)}; enable quality or drop those objectives")
    if quality.enabled and quality.fid_features == "inception":
        from tuner.measure.fid import check_fid_weights

        check_fid_weights(quality)


def study_objectives(space: Space, workload: str, quality: Objective | None,
                     given: tuple[str, ...] | None) -> list[Objective]:
    """The study's objectives: --objective's where given (the CLI twin of the space's `objectives:`, which it
    overrides: objective_note says so), else the space's; `quality` stands for the workload's own either way."""
    if not given:
        return space.objectives_for(workload, quality)
    out: list[Objective] = []
    for name in given:
        known = BY_KEY.get(name)
        if name == QUALITY and quality is None:
            raise ConfigError(f"--objective quality stands for the workload's quality objective, but workload "
                              f"{workload} declares none (Workload.quality); name a metric instead")
        if name != QUALITY and (known is None or known.direction is None):
            names = ", ".join([QUALITY, *(m.key for m in METRICS if m.direction is not None)])
            raise ConfigError(f"--objective {name!r} is not a metric to optimize; use one of {names} (or a metric "
                              f"your workload's evaluate returns, in the space's objectives: with its direction)")
        o = quality if quality is not None and name == QUALITY else \
            Objective(metric=name, direction=known.direction if known is not None else None)
        if any(x.metric == o.metric for x in out):
            raise ConfigError(f"--objective {name} is given twice (or is the workload's quality, already given); "
                              f"give each objective once")
        out.append(o)
    return out


def objective_note(plan: SearchPlan) -> str | None:
    """The one line saying --objective replaced the space's objectives (None: not given, or the same)."""
    given = plan.options.objectives
    if not given or plan.resume:
        return None
    theirs = [o.metric for o in plan.space.objectives_for(plan.workload.text, Objective(metric=QUALITY))]
    if theirs == list(given):
        return None
    return f"--objective {' '.join(given)} overrides the space's objectives ({', '.join(theirs)})"


def meta_quality(meta: StudyMeta) -> Objective | None:
    """The saved study's quality objective (what `quality` stood for when it started), None without one."""
    return next((o for o in meta.objectives if is_quality_metric(o.metric) and o.metric != QUALITY), None)


def is_quality_metric(metric: str) -> bool:
    """Scored after training by the workload's evaluate() (anything but the speed and cost figures)."""
    known = BY_KEY.get(metric)
    return known is None or known.group == "quality" or metric == QUALITY


def _plan_resume(opts: SearchOptions, given_space: Space | None, study: str, folder: StudyFolder,
                 reports_dir: Path) -> SearchPlan:
    if not folder.exists():
        raise StudyError(f"no study '{study}' to resume at {folder.path}; start it without --resume, or check "
                         f"--study and --reports-dir")
    meta = folder.read_meta()
    asked = (meta.resources or {}).get("asked") or {}  # as first given: kept unless given again
    opts = replace(opts, **{k: v for k, v in asked.items() if k in RESOURCE_OPTIONS and getattr(opts, k) is None})
    source = f"{folder.meta_path}: space_def"
    saved_space = parse_space(meta.space_def, source=source, name=meta.space or study)
    saved_space = saved_space.model_copy(update={"source": meta.space_source or source})
    if given_space is not None and given_space.definition() != saved_space.definition():
        raise StudyError(f"space {opts.space} differs from the one study '{study}' was started with; resume "
                         f"without --space, or start a new study with --study NEW_NAME")

    def same(option: str, given: Any, saved: Any) -> None:
        if given is not None and given != saved:
            raise StudyError(f"study '{study}' was started with {option} {saved}; resume without {option} "
                             f"(or start a new study with --study NEW_NAME)")

    saved_budget = Budget.model_validate(meta.budget)
    ref = resolve_workload(meta.workload)
    same("--workload", resolve_workload(opts.workload).text if opts.workload is not None else None, ref.text)
    same("--dataset", opts.dataset, meta.dataset)
    same("--option", opts.workload_options or None, meta.workload_options)
    same("--sampler", opts.sampler, meta.sampler)
    same("--seed", opts.seed, meta.seed)
    # A copied or renamed folder opens its own database; a password is kept in the folder's storage.url alone.
    storage = resolve_storage(saved_url(folder.path, meta.storage), folder.path)
    same("--storage", shown_url(opts.storage) if opts.storage else None,
         shown_url(storage) if storage != default_storage(folder.path) else None)
    check_storage_url(storage)  # e.g. the database driver is not installed where the study is resumed
    budget = _budget(opts)
    if budget is not None and budget != saved_budget:
        same("the budget", budget.describe(), saved_budget.describe())
    _check_quality(saved_space, meta.objectives)
    if opts.objectives and [o.metric for o in study_objectives(saved_space, ref.text, meta_quality(meta),
                                                              opts.objectives)] != [o.metric for o in meta.objectives]:
        same("--objective", " ".join(opts.objectives), " ".join(o.metric for o in meta.objectives))
    scheduler = saved_scheduler(meta.scheduler)
    asked = {k: v for k, v in opts.scheduler_options.items() if v is not None}
    if opts.scheduler is not None or asked:
        name = opts.scheduler or scheduler.name
        kept = name == scheduler.name  # what is not given again stays as saved
        given = plan_scheduler(name, saved_budget, {o.key: asked.get(o.key) if o.key in asked or not kept else
                                                    getattr(scheduler, o.key) for o in scheduler_options()},
                               target=bool(getattr(meta, "target", None)))
        if given != scheduler:
            same("--scheduler", given.describe(), scheduler.describe())
    check_resumed_target(opts, meta, study)  # tuner.target: the saved target and K are kept
    horizon = plan_horizon_option(opts, meta.horizon, saved_budget)
    check_study_files(folder, meta)  # the stored domains, records and rung entries read, before any work
    check_study_database(folder, meta, storage)  # last: it opens the database
    return SearchPlan(
        study=study, folder=folder, reports_dir=reports_dir, storage=storage, space=saved_space,
        objectives=list(meta.objectives), workload=ref, workload_options=dict(meta.workload_options),
        dataset=meta.dataset, budget=saved_budget,
        trials=opts.trials or (MAX_TRIALS if opts.study_seconds else meta.trials), sampler=meta.sampler,
        seed=meta.seed, resume=True, kept_trials=meta.trials if opts.study_seconds and not opts.trials else None,
        options=opts, meta=meta, confirm_trials=_pick(opts.confirm, meta.confirm.get("trials"), DEFAULT_TRIALS),
        confirm_repeats=_pick(opts.repeats, meta.confirm.get("repeats"), DEFAULT_REPEATS),
        optuna_study=meta.name, scheduler=scheduler, preflight=meta.preflight or Preflight(), horizon=horizon,
    )


def plan_horizon_option(opts: SearchOptions, saved: dict[str, Any] | None, budget: Budget) -> dict[str, Any] | None:
    """The study's horizon check as study.json keeps it, from --horizon and --horizon-seeds (tuner.config's syntax,
    as `tuner export --horizon` reads it) over the saved one on --resume; a bad value, or a horizon no longer than
    the trials' budget, is one ConfigError line before any work (across units the pick's pace decides, after the
    study: tuner.report.horizon)."""
    if opts.horizon_seeds is not None and opts.horizon_seeds < 1:
        raise ConfigError(f"--horizon-seeds {opts.horizon_seeds}: at least 1")
    if opts.horizon is None:
        if saved is None:
            if opts.horizon_seeds is not None:
                raise ConfigError("--horizon-seeds sets the seeds of --horizon's check: give --horizon too")
            return None
        return {**saved, "seeds": opts.horizon_seeds} if opts.horizon_seeds is not None else dict(saved)
    horizon = parse_horizon(opts.horizon)
    check_horizon_longer(horizon, budget)
    seeds = opts.horizon_seeds if opts.horizon_seeds is not None else \
        (saved or {}).get("seeds", HORIZON_SEEDS)
    return {"budget": horizon.model_dump(exclude_none=True), "seeds": seeds}


def _pick(given: int | None, saved: int | None, default: int) -> int:
    return given if given is not None else saved if saved is not None else default


def trial_base(plan: SearchPlan, gpus: int, device: str) -> dict[str, Any]:
    """What every trial's config shares (the space adds its `trial:` section, the sampler the knobs)."""
    return {"workload": plan.workload.text, "workload_options": plan.workload_options, "dataset": plan.dataset,
            "budget": plan.budget.model_dump(exclude_none=True), "gpus": gpus, "params": {"device": device},
            "target": plan.target.model_dump() if plan.target is not None else None}


@dataclass(frozen=True)
class _Sized:
    """What the pre-flight's timings make of the plan's budget (_check_budget): the budget and rungs the trials
    run, the timings study.json keeps, and the notes said as the study starts."""

    budget: Budget
    scheduler: SchedulerPlan
    preflight: Preflight
    sized: str | None = None
    heavy_note: str | None = None


def _check_budget(plan: SearchPlan, cfg: Any, check: Any, device: str) -> _Sized:
    """Refuse a budget the user gave that cannot hold the trial's step and scorings (one per rung a trial can
    reach besides the last), or raise the space's default budget to the one it needs, saying so in `sized`; and
    keep the pre-flight's timings for the trials' scoring reserve (`preflight`, study.json). The plan is read,
    not changed: check_plan makes the final plan from what this returns."""
    from tuner.train import check_budget, needed_budget

    scorings = max(len(plan.scheduler.rungs), 1)
    score_s = check.score_seconds * scorings if check.score_seconds is not None else None
    opts = plan.options
    given = opts.budget_seconds is not None or opts.budget_samples is not None
    budget, scheduler, sized, heavy_note = plan.budget, plan.scheduler, None, None
    preflight = Preflight.model_validate({
        "step_seconds": check.step_seconds, "step_samples": check.step_samples, "score_seconds": check.score_seconds,
        "device": device, **{k: getattr(cfg.params, k) for k in heavy_knobs()}})  # batch_size, accumulation_steps
    step_s, heavy = check.step_seconds, check.heavy
    want = needed_budget(cfg, step_s, score_s, rounded=True)
    if want is not None and not given and budget.seconds is not None:
        old = budget.seconds
        budget = budget.model_copy(update={"seconds": want})
        if scheduler.rungs:  # the rungs are fractions of the budget
            scheduler = plan_scheduler(scheduler.name, budget, opts.scheduler_options)
        scoring = f" and scoring about {score_s:.3g} s" if score_s else ""
        sized = (f"the space's {old:g} s budget is too short for workload {check.name}: one training step "
                 f"took {step_s:.3g} s in the pre-flight ({_step_words(cfg, False)} on {device}){scoring}; "
                 f"each trial trains {want:g} s instead (give --budget-seconds to choose)")
        preflight.sized = SizedBudget(from_=old, to=want)
        cfg = cfg.model_copy(update={"budget": budget})
    check_budget(cfg, step_s, device, check.name, score_s)
    if heavy is not None and step_s is not None and heavy.step_seconds > step_s:
        # The space's slowest step is told, not imposed: sizing every trial for batch 256 x 4 accumulation would
        # have made the default GAN study's 15 s trials several times longer for the few trials sampled there.
        preflight.heaviest = top_step = heavy
        top = cfg.model_copy(update={"params": cfg.params.model_copy(
            update={k: getattr(heavy, k) for k in heavy_knobs()})})
        need = needed_budget(top, top_step.step_seconds, score_s, rounded=True)
        if need is not None:
            top_step.needs_budget = need
            heavy_note = (f"trials at {_step_words(top, True)} need about {need:g} s: one of their steps took "
                          f"{top_step.step_seconds:.3g} s in the pre-flight, so in the {cfg.budget.seconds:g} s "
                          f"budget they measure fewer windows than the others and are flagged suspect; give "
                          f"--budget-seconds {need:g} to measure them fully, or narrow batch_size / "
                          f"accumulation_steps in the space")
    return _Sized(budget=budget, scheduler=scheduler, preflight=preflight, sized=sized, heavy_note=heavy_note)


def _step_words(cfg: Any, heaviest: bool) -> str:
    """`batch 64`, or `the space's largest micro-batch, batch 256 x 4 accumulation`."""
    p = cfg.params
    words = f"batch {p.batch_size}" + (f" x {p.accumulation_steps} accumulation" if p.accumulation_steps > 1 else "")
    return f"the space's largest micro-batch, {words}" if heaviest else words


def _heaviest(space: Any, cfg: Any) -> dict[str, Any] | None:
    """The space's largest micro-batch and accumulation, where they exceed the baseline's (None: the baseline's
    step is the space's heaviest): the step the pre-flight also times, so a study says when its slowest trials do not
    fit the budget. A space that splits an effective batch: its largest effective batch in its largest micro-batch
    (tuner.space.heaviest_split), not the domains' tops, which no split reaches."""
    from tuner.space import heaviest_split

    split = heaviest_split(space)
    if split is not None:
        return split if any(v > getattr(cfg.params, k) for k, v in split.items()) else None
    out: dict[str, Any] = {}
    for name in heavy_knobs():  # tuner.knobs: the step's work grows with each, so the slowest step is at their top
        spec = space.params.get(name)
        ends = [v for v in (spec.endpoints() if spec is not None else []) if isinstance(v, (int, float))
                and not isinstance(v, bool)]
        if ends and max(ends) > getattr(cfg.params, name):
            out[name] = int(max(ends))
    return out or None


def check_plan(plan: SearchPlan, trial_device: Any = None) -> SearchPlan:
    """Build the workload once, as a trial would, before Ray starts (tuner.train.check_workload), and resolve the
    objectives: `quality` becomes the workload's own, and a metric of the workload's must be among what its
    evaluate() returns. With `trial_device` (a tuner.device.Device: the kind of device the trials run on, on this
    machine) the check runs and times its step and scoring there, and a seconds budget too short for them is
    refused here, naming the budget it needs (tuner.train.preflight.check_budget), whatever the device. Without
    it (a cluster's trials, a resume) the check runs on the CPU and the budget is not checked.
    Returns the plan the trials run (the one place the planned budget changes, before any TrialOrder exists)."""
    from tuner.device import resolve_device
    from tuner.space import split_learning_note
    from tuner.train import check_workload

    # The trials' resources are not known yet (the cluster may not be joined): any valid point of the space will
    # do to build the workload, so bounds are resolved leniently for one CPU process.
    context = {"cpus": 1, "gpus": 0, "precisions": ["fp32"], "tf32_available": False, "device": "cpu"}
    resolved = plan.space.resolve(context, strict=False)
    point = resolved.baseline_point(context)
    cfg = plan.space.trial_config(point, trial_base(plan, 0, "cpu"), source=f"study '{plan.study}'")
    heaviest = _heaviest(resolved, cfg) if trial_device is not None and plan.budget.seconds is not None else None
    check = check_workload(cfg, plan.cache_dir, trial_device or resolve_device("cpu"), heaviest=heaviest)
    sized = _check_budget(plan, cfg, check, trial_device.describe()) if trial_device is not None else \
        _Sized(budget=plan.budget, scheduler=plan.scheduler, preflight=plan.preflight, sized=plan.sized,
               heavy_note=plan.heavy_note)
    preflight = sized.preflight
    if preflight.timed():  # study.json keeps them: the report shows the split's role from them
        preflight = preflight.model_copy(update={"batch_statistics": list(check.batch_statistics)})
    pace = (check.step_samples / check.step_seconds, check.target_score_seconds) \
        if trial_device is not None and check.step_seconds and check.step_samples and check.score_seconds is not None \
        else None  # measured on the trials' kind of device, or not the trials' pace; an evaluation during training
    # costs the subset's scoring where the workload asks for one (target_eval_samples)
    target = study_target(plan, cfg, check.quality, sized.budget, pace)  # tuner.target
    few = None
    if not plan.resume and pace is not None:  # a K the reference run cannot read a target from: adapted or refused
        target, few = check_target_evaluations(target, sized.budget, pace[0], pace[1],
                                               plan.options.eval_every_samples is not None, cfg.params.effective_batch)
    lacking = [n for n in hyperparameter_knobs() if n in plan.space.searched and n not in check.own]
    if lacking:
        raise ConfigError(f"{plan.space.source}: params: searches {', '.join(lacking)}, which workload "
                          f"{plan.workload.text}'s optimizer does not take (no {knob(lacking[0]).hyperparameter} "
                          f"in its hyperparameters); use a space without them (--space loader, which searches no lr) "
                          f"or a copy of {plan.space.source} without {' and '.join(lacking)}")
    objectives = plan.objectives if plan.resume else study_objectives(plan.space, plan.workload.text, check.quality,
                                                                      plan.options.objectives)
    for o in objectives:
        if o.metric not in BY_KEY and o.metric not in check.metrics:
            raise ConfigError(f"{plan.space.source}: objectives: {o.metric!r} is not a metric tuner measures nor one "
                              f"that workload {plan.workload.text}'s evaluate() returns "
                              f"({', '.join(check.metrics) or 'none'})")
    return replace(plan, objectives=objectives, budget=sized.budget, scheduler=sized.scheduler, preflight=preflight,
                   sized=sized.sized, heavy_note=sized.heavy_note, own=check.own, target=target,
                   batch_note=split_learning_note(plan.space, check.batch_statistics),  # issue 40: said at the start
                   eval_note=few,
                   preflight_s=preflight_trial_s(sized.budget, check.step_seconds, check.step_samples,
                                                 check.score_seconds))
