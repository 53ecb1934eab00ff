"""plan_search: the options of `tuner search` made a SearchPlan (tuner.search._options), without Ray or disk.

It parses the space, resolves defaults (the space's, or the saved study's on --resume: `_plan_resume`, which
refuses an option given again with another value), validates every option, checks the study name, the storage and
the dataset, and plans the target and the horizon check. It is pure: it raises a UserError or returns the plan, so
bad input never starts Ray or touches disk.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tuner.config import HORIZON_SEEDS, Budget, budget_from_options, check_horizon_longer, parse_horizon
from tuner.errors import ConfigError, StudyError
from tuner.search._allowance import MAX_TRIALS, check_seconds
from tuner.search._confirm import DEFAULT_REPEATS, DEFAULT_TARGET_REPEATS, DEFAULT_TRIALS
from tuner.schedule import plan_scheduler, saved_scheduler, scheduler_options
from tuner.space import Space, load_space, parse_space
from tuner.search._objectives import check_quality, meta_quality, study_objectives
from tuner.search._options import (BUSY_CHOICES, RESOURCE_OPTIONS, SAMPLERS, STUDY_NAME, SearchOptions,
                                   SearchPlan)
from tuner.target import check_resumed_target, plan_target
from tuner.search._storage import (check_storage_url, check_study_database, check_study_files, default_storage,
                                   resolve_storage, saved_url, shown_url, storage_has_study)
from tuner.study import LOCK_FILE, QUALITY, Objective, Preflight, StudyFolder
from tuner.builtin import resolve_workload


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
    check_quality(space, objectives)
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


def same_space(given: Space, saved: Space) -> bool:
    """Whether the space file given on resume is the one the study started with: study.json's copy also holds the
    workload's own batch where the study put it there (Space.with_own_batch), and lacks the bundled space's betas
    its workload's optimizer does not take (tuner.search._check._fit_optimizer). Only a bundled space is compared
    without those: a file of the user's own that gained them since is another space."""
    from tuner.knobs import hyperparameter_knobs

    if given.bundled:
        given = given.without([n for n in hyperparameter_knobs() if n in given.params and n not in saved.params])
    if given.definition() == saved.definition():
        return True
    own = (saved.trial.get("params") or {}).get("batch_size")
    try:
        return own is not None and given.with_own_batch(int(own))[0].definition() == saved.definition()
    except ConfigError:  # the given space cannot split that batch: another space
        return False


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
    if given_space is not None and not same_space(given_space, saved_space):
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
    check_quality(saved_space, meta.objectives)
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
