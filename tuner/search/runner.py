"""`tuner search` as a library call: `run_search(SearchOptions(...)) -> SearchSummary`.

Order of work, so that bad input never starts Ray or touches disk:
  1. plan_search(): parse the space, resolve defaults, validate every option, check the study name (exists /
     missing with --resume) and the dataset path. Pure: raises a UserError or returns a SearchPlan.
  2. Count the machine's GPUs (or join the cluster with --address) and decide per-trial resources and
     concurrency: one trial per whole GPU, or on a CPU-only machine one trial at a time on all its cores.
  3. Create (or reconcile, on --resume) the study folder and the Optuna study, then run a Ray Tune Tuner whose
     searcher is a StudySearcher over that Optuna study.

Resume does not replay Ray's experiment state: Ray checkpoints it periodically, so after kill -9 it can lag
behind trials that already finished. The Optuna database is written at every tell, so it is the source of truth:
trials left RUNNING by a kill are marked FAIL (the samplers ignore them), complete trials whose result file is
missing are rewritten from the record kept in Optuna, and a new Ray experiment runs the remaining trials against
the same study, so the sampler sees everything that came before.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tuner.config import Budget
from tuner.errors import ConfigError, DeviceError, StudyError
from tuner.report.trials import STUDY_META, load_trials, read_study_meta, record_trial, trial_dir, write_study_meta
from tuner.search.space import Objective, Space, load_space, parse_space

SAMPLERS = ("tpe", "nsga2", "random")
WORKLOADS = ("gan", "cnn")
STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
CACHE_DIR = ".cache"
RAY_DIR = "ray"


@dataclass
class SearchOptions:
    """What `tuner search` accepts. None means "not given": the space's defaults (or the saved study's, on
    --resume) apply."""

    space: str | None = None
    study: str | None = None
    trials: int | None = None
    workload: str | None = None
    dataset: str | None = None
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
    startup_trials: int | None = None  # random trials before TPE models (default: about a third, 3..10)
    wall_limit_s: float | None = None  # fixed per-trial training wall cap (default: from the budget, see searcher)
    engine: Any = None  # the training engine (tuner.train.run_trial's signature); tests pass fakes


@dataclass
class SearchPlan:
    """Validated, resolved settings. Nothing has been created yet."""

    study: str
    study_dir: Path
    reports_dir: Path
    storage: str
    space: Space
    objectives: list[Objective]
    workload: str
    dataset: str
    budget: Budget
    trials: int
    sampler: str
    seed: int
    resume: bool
    options: SearchOptions
    meta: dict[str, Any] = field(default_factory=dict)  # the saved study.json on --resume


@dataclass
class ClusterInfo:
    cpus: float
    gpus: float
    nodes: int
    node_cpus: float  # CPUs of the smallest node (a trial runs on one node)
    node_gpus: float  # GPUs of the largest node


@dataclass
class Resources:
    cpus_per_trial: float
    gpus_per_trial: float
    concurrency: int
    ddp_workers: int = 0
    warnings: list[str] = field(default_factory=list)

    def describe(self) -> str:
        where = f"{self.gpus_per_trial:g} GPU + {self.cpus_per_trial:g} CPUs" if self.gpus_per_trial else \
            f"{self.cpus_per_trial:g} CPUs"
        ddp = f" (DDP, {self.ddp_workers} workers)" if self.ddp_workers > 1 else ""
        return f"{self.concurrency} at a time, each on {where}{ddp}"


@dataclass
class SearchSummary:
    study: str
    study_dir: Path
    storage: str
    objectives: list[Objective]
    params: list[str]
    total: int  # requested trials in the study
    finished: int  # recorded trials (any state)
    ran: int  # trials recorded by this call
    states: dict[str, int]
    front: list[dict[str, Any]]
    seconds: float
    interrupted: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def complete(self) -> int:
        return self.states.get("complete", 0)


# --- 1. plan ---------------------------------------------------------------------------------------------------


def plan_search(opts: SearchOptions) -> SearchPlan:
    """Validate everything that can be validated without Ray or side effects."""
    reports_dir = Path(opts.reports_dir).expanduser().resolve()
    _check_numbers(opts)
    if opts.sampler is not None and opts.sampler not in SAMPLERS:
        raise ConfigError(f"unknown sampler {opts.sampler!r}; use one of {', '.join(SAMPLERS)}")
    if opts.workload is not None and opts.workload not in WORKLOADS:
        raise ConfigError(f"unknown workload {opts.workload!r}; use one of {', '.join(WORKLOADS)}")
    if opts.space is None and not (opts.resume and opts.study):
        raise ConfigError("give --space NAME|PATH (or --study NAME --resume to continue a study)")
    given_space = load_space(opts.space) if opts.space is not None else None
    study = opts.study or (given_space.name if given_space else "")
    if not STUDY_NAME.match(study):
        raise ConfigError(f"study name {study!r} must be letters, digits, '_', '-' or '.' (at most 100); "
                          f"pass --study NAME")
    study_dir = reports_dir / study
    if opts.resume:
        return _plan_resume(opts, given_space, study, study_dir, reports_dir)

    if study_dir.exists() and any(study_dir.iterdir()):
        what = "already exists" if (study_dir / STUDY_META).is_file() else "is a folder that is not empty"
        raise StudyError(f"study '{study}' {what} at {study_dir}; add --resume to continue it, or pick another "
                         f"name with --study NEW_NAME")
    assert given_space is not None
    storage = opts.storage or default_storage(study_dir)
    if opts.storage:
        _check_storage_url(opts.storage)
    if opts.storage and storage_has_study(storage, study):
        raise StudyError(f"study '{study}' already exists in storage {opts.storage}; add --resume to continue it, "
                         f"or pick another name with --study NEW_NAME")
    space = given_space
    workload = opts.workload or space.defaults.workload
    objectives = space.objectives_for(workload)
    dataset = opts.dataset or space.defaults.dataset
    _check_dataset(dataset)
    _check_quality(space, workload, objectives)
    return SearchPlan(
        study=study, study_dir=study_dir, reports_dir=reports_dir, storage=storage, space=space,
        objectives=objectives, workload=workload, dataset=dataset, budget=_budget(opts) or space.defaults.budget,
        trials=opts.trials or space.defaults.trials, sampler=opts.sampler or "tpe",
        seed=opts.seed if opts.seed is not None else 0, resume=False, options=opts,
    )


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
    positive("wall_limit_s", opts.wall_limit_s)
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
    if opts.budget_seconds is not None:
        return Budget(seconds=opts.budget_seconds)
    if opts.budget_samples is not None:
        return Budget(samples=opts.budget_samples)
    return None


def _check_dataset(dataset: str) -> None:
    from tuner.data import check_dataset

    check_dataset(dataset)


QUALITY_METRICS = ("fid", "loss", "accuracy", "quality_seconds")


def _check_quality(space: Space, workload: str, objectives: list[Objective]) -> None:
    """A quality objective needs quality scoring on; Inception FID needs its weights on disk (never downloaded)."""
    from tuner.config import Quality

    quality = Quality.model_validate(space.trial.get("quality") or {})
    wanted = [o.metric for o in objectives if o.metric in QUALITY_METRICS]
    if wanted and not quality.enabled:
        raise ConfigError(f"{space.source}: trial.quality.enabled: false, but the {workload} objectives need "
                          f"{', '.join(wanted)}; enable quality or drop those objectives")
    if workload == "gan" and quality.enabled and quality.fid_features == "inception":
        from tuner.measure.fid import check_fid_weights

        check_fid_weights(quality)


def _plan_resume(opts: SearchOptions, given_space: Space | None, study: str, study_dir: Path,
                 reports_dir: Path) -> SearchPlan:
    if not (study_dir / STUDY_META).is_file():
        raise StudyError(f"no study '{study}' to resume at {study_dir}; start it without --resume, or check "
                         f"--study and --reports-dir")
    meta = read_study_meta(study_dir)
    source = f"{study_dir / STUDY_META}: space_def"
    saved_space = parse_space(meta["space_def"], source=source, name=meta.get("space", study))
    saved_space = saved_space.model_copy(update={"source": meta.get("space_source", source)})
    if given_space is not None and given_space.definition() != saved_space.definition():
        raise StudyError(f"space {opts.space} differs from the one study '{study}' was started with; resume "
                         f"without --space, or start a new study with --study NEW_NAME")

    def same(option: str, given: Any, saved: Any) -> None:
        if given is not None and given != saved:
            raise StudyError(f"study '{study}' was started with {option} {saved}; resume without {option} "
                             f"(or start a new study with --study NEW_NAME)")

    saved_budget = Budget.model_validate(meta["budget"])
    same("--workload", opts.workload, meta["workload"])
    same("--dataset", opts.dataset, meta["dataset"])
    same("--sampler", opts.sampler, meta["sampler"])
    same("--seed", opts.seed, meta["seed"])
    same("--storage", opts.storage, meta["storage"] if meta["storage"] != default_storage(study_dir) else None)
    budget = _budget(opts)
    if budget is not None and budget != saved_budget:
        same("the budget", budget.describe(), saved_budget.describe())
    _check_dataset(meta["dataset"])
    objectives = [Objective.model_validate(o) for o in meta["objectives"]]
    _check_quality(saved_space, meta["workload"], objectives)
    return SearchPlan(
        study=study, study_dir=study_dir, reports_dir=reports_dir, storage=meta["storage"], space=saved_space,
        objectives=objectives, workload=meta["workload"], dataset=meta["dataset"], budget=saved_budget,
        trials=opts.trials or int(meta["trials"]), sampler=meta["sampler"], seed=int(meta["seed"]), resume=True,
        options=opts, meta=meta,
    )


# --- storage ---------------------------------------------------------------------------------------------------


def default_storage(study_dir: Path) -> str:
    return f"sqlite:///{Path(study_dir) / 'study.db'}"


def _sqlite_path(url: str) -> Path | None:
    return Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else None


def _check_storage_url(url: str) -> None:
    if "://" not in url:
        raise ConfigError(f"--storage {url!r} is not a database URL; use e.g. sqlite:///path/to/study.db or "
                          f"postgresql://user@host/db")
    path = _sqlite_path(url)
    if path is not None and not path.expanduser().parent.is_dir():
        raise ConfigError(f"--storage {url}: folder {path.expanduser().parent} does not exist")


def storage_has_study(url: str, name: str) -> bool:
    """Whether the Optuna storage holds a study of that name (a missing SQLite file holds none; nothing is
    created to find out)."""
    path = _sqlite_path(url)
    if path is not None and not path.exists():
        return False
    storage = open_storage(url)
    return any(s.study_name == name for s in storage.get_all_studies())


def open_storage(url: str) -> Any:
    import optuna

    try:
        return optuna.storages.RDBStorage(url)
    except Exception as err:  # a bad URL or an unreachable server: the user's to fix
        raise ConfigError(f"--storage {url}: cannot open the database: {type(err).__name__}: {err}") from None


# --- 2. resources ----------------------------------------------------------------------------------------------


def local_cluster() -> ClusterInfo:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cpus = os.cpu_count() or 1
    return ClusterInfo(cpus=cpus, gpus=gpus, nodes=1, node_cpus=cpus, node_gpus=gpus)


def ray_cluster() -> ClusterInfo:
    """Resources of the connected Ray cluster (alive nodes)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    node_cpus = [float(n.get("Resources", {}).get("CPU", 0)) for n in nodes] or [0.0]
    node_gpus = [float(n.get("Resources", {}).get("GPU", 0)) for n in nodes] or [0.0]
    total = ray.cluster_resources()
    return ClusterInfo(cpus=float(total.get("CPU", 0)), gpus=float(total.get("GPU", 0)), nodes=max(1, len(nodes)),
                       node_cpus=min(c for c in node_cpus if c > 0) if any(node_cpus) else 0.0,
                       node_gpus=max(node_gpus))


def resolve_resources(opts: SearchOptions, cluster: ClusterInfo) -> Resources:
    """Per-trial resources and concurrency so that trials do not distort each other's timings by default:
    one trial per whole GPU on a GPU machine, one trial per node on all its cores on a CPU-only one."""
    g = opts.gpus_per_trial
    if g is not None and g > 0 and cluster.gpus <= 0:
        raise DeviceError(f"--gpus-per-trial {g:g} asked for, but this machine has no GPU; drop it to run on CPUs")
    if g is not None and g > max(cluster.node_gpus, 0):
        raise DeviceError(f"--gpus-per-trial {g:g} is more than the {cluster.node_gpus:g} GPU(s) of any node; "
                          f"ask for at most {cluster.node_gpus:g}")
    if opts.cpus_per_trial is not None and opts.cpus_per_trial > cluster.node_cpus:
        raise DeviceError(f"--cpus-per-trial {opts.cpus_per_trial:g} is more than the {cluster.node_cpus:g} CPUs "
                          f"of any node; ask for at most {cluster.node_cpus:g}")
    notes: list[str] = []
    gpus = float(g) if g is not None else (1.0 if cluster.gpus >= 1 else 0.0)
    if gpus > 0:
        per_gpu = max(1.0, float(int(cluster.node_cpus // max(cluster.node_gpus, 1))))
        cpus = opts.cpus_per_trial or max(1.0, per_gpu * max(gpus, 1.0))
        cpus = min(cpus, cluster.node_cpus)
        slots = max(1, int(cluster.gpus // gpus))
        concurrency = opts.concurrency or slots
        if gpus < 1:
            notes.append(f"--gpus-per-trial {gpus:g} puts {int(round(1 / gpus))} trials on one GPU: they share its "
                         f"compute and memory, so their throughput figures distort each other")
    else:
        slots = cluster.nodes
        concurrency = opts.concurrency or slots
        cpus = opts.cpus_per_trial or (cluster.node_cpus if concurrency <= slots else
                                       max(1.0, float(int(cluster.node_cpus * slots // concurrency))))
        if concurrency > slots:
            notes.append(f"--concurrency {concurrency} runs timed trials side by side on the same CPUs "
                         f"({cluster.node_cpus:g} per node): they slow each other down, so throughput is distorted; "
                         f"leave --concurrency unset to run one at a time")
    ddp = int(gpus) if gpus > 1 else 0
    return Resources(cpus_per_trial=cpus, gpus_per_trial=gpus, concurrency=int(concurrency), ddp_workers=ddp,
                     warnings=notes)


# --- 3. run ----------------------------------------------------------------------------------------------------


def quiet_ray_environment() -> None:
    """Environment Ray reads at start-up: no usage stats, no auth token file, old (quiet) console output."""
    for key, value in (("RAY_USAGE_STATS_ENABLED", "0"), ("RAY_AUTH_MODE", "disabled"), ("RAY_AIR_NEW_OUTPUT", "0"),
                       ("TUNE_PRINT_ALL_TRIAL_ERRORS", "0"), ("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1"),
                       ("RAY_DEDUP_LOGS", "0")):
        os.environ.setdefault(key, value)


def make_sampler(name: str, seed: int, trials: int, startup: int | None) -> Any:
    import optuna

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "nsga2":
        population = max(4, min(50, trials // 3))
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
    n_startup = startup if startup is not None else max(3, min(10, trials // 3))
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=n_startup, multivariate=True)


def _versions() -> dict[str, str]:
    import optuna
    import ray
    import torch

    import tuner

    return {"python": platform.python_version(), "torch": torch.__version__, "ray": ray.__version__,
            "optuna": optuna.__version__, "tuner": tuner.__version__}


def _hardware(cluster: ClusterInfo) -> dict[str, Any]:
    import torch

    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cluster.gpus else []
    return {"cpu_count": os.cpu_count(), "cluster_cpus": cluster.cpus, "gpus": cluster.gpus, "gpu_names": names,
            "nodes": cluster.nodes, "platform": platform.platform(), "processor": platform.processor()}


def study_meta(plan: SearchPlan, cluster: ClusterInfo, resources: Resources,
               baseline: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "name": plan.study,
        "space": plan.space.name,
        "space_source": plan.space.source,
        "space_def": plan.space.definition(),
        "params": plan.space.searched,
        "objectives": [o.model_dump() for o in plan.objectives],
        "workload": plan.workload,
        "dataset": plan.dataset,
        "budget": plan.budget.model_dump(exclude_none=True),
        "trials": plan.trials,
        "sampler": plan.sampler,
        "seed": plan.seed,
        "baseline": {"trial": 0, "params": baseline} if baseline else None,
        "storage": plan.storage,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hardware": _hardware(cluster),
        "resources": {"cpus_per_trial": resources.cpus_per_trial, "gpus_per_trial": resources.gpus_per_trial,
                      "concurrency": resources.concurrency},
        "versions": _versions(),
    }


def reconcile_study(study_dir: Path, storage: Any, study_name: str) -> int:
    """After a kill: mark trials left RUNNING as FAIL, and rewrite the result file of any complete trial that
    lacks one from the record kept in Optuna. Returns the number of Optuna trials (any state)."""
    import optuna
    from optuna.trial import TrialState

    from tuner.search.searcher import RECORD_ATTR

    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        return 0
    trials = study.get_trials(deepcopy=False)
    for t in trials:  # WAITING (an enqueued baseline never asked for) stays: the next search asks it first
        if t.state == TrialState.RUNNING:
            storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        elif t.state == TrialState.COMPLETE and RECORD_ATTR in t.user_attrs:
            if not (trial_dir(study_dir, t.number) / "result.json").is_file():
                record_trial(study_dir, t.user_attrs[RECORD_ATTR])
    return len(trials)


def _start_ray(opts: SearchOptions, cluster: ClusterInfo | None) -> bool:
    """Start (or join, with --address) Ray unless this process already has it. Returns whether we did."""
    import ray

    if ray.is_initialized():
        return False
    level = logging.INFO if opts.verbose else logging.ERROR
    common = dict(include_dashboard=False, log_to_driver=opts.verbose, logging_level=level)
    if opts.address:
        try:
            ray.init(address=opts.address, **common)
        except Exception as err:
            raise DeviceError(f"cannot join the Ray cluster at {opts.address}: {type(err).__name__}: {err}") from None
        return True
    assert cluster is not None
    package_root = str(Path(__file__).resolve().parents[2])  # workers import tuner even when cwd is elsewhere
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=int(cluster.cpus), num_gpus=int(cluster.gpus), object_store_memory=256 * 2**20,
             runtime_env={"env_vars": {"PYTHONPATH": path}}, **common)
    return True


def run_search(opts: SearchOptions, console: Any = None) -> SearchSummary:
    """Plan, check resources, create or reconcile the study, run the trials, and summarize.

    `console` (a rich Console) gets the live view and warnings; None runs silently."""
    t0 = time.perf_counter()
    plan = plan_search(opts)
    quiet_ray_environment()
    cluster = None
    if not opts.address:
        cluster = local_cluster()
        resolve_resources(opts, cluster)  # refuse impossible GPU/CPU asks before Ray starts
    if plan.resume:
        early = _resume_without_work(plan, console, t0)
        if early is not None:
            return early

    import ray

    started = _start_ray(opts, cluster)
    try:
        if opts.address or started is False:
            cluster = ray_cluster()
        assert cluster is not None
        resources = resolve_resources(opts, cluster)
        return _run(plan, cluster, resources, console, t0)
    finally:
        if started:
            ray.shutdown()


def _resume_without_work(plan: SearchPlan, console: Any, t0: float) -> SearchSummary | None:
    storage = open_storage(plan.storage)
    reconcile_study(plan.study_dir, storage, plan.study)
    records = load_trials(plan.study_dir)
    if len(records) < plan.trials:
        return None
    if console is not None:
        console.print(f"study '{plan.study}' already has {len(records)} of {plan.trials} trials; nothing to run "
                      f"(raise --trials to run more)", soft_wrap=True)
    return _summary(plan, records, ran=0, t0=t0, interrupted=False, notes=[])


def _run(plan: SearchPlan, cluster: ClusterInfo, resources: Resources, console: Any, t0: float) -> SearchSummary:
    import optuna
    from ray import tune

    from tuner.search.progress import SearchView
    from tuner.search.recorder import StudyRecorder
    from tuner.search.searcher import StudySearcher
    from tuner.search.trainable import TrialSetup, trainable

    opts = plan.options
    for note in resources.warnings:
        if console is not None:
            console.print(f"[yellow]warning:[/yellow] {note}", soft_wrap=True)
    study_dir = plan.study_dir
    gpus_in_trial = resources.gpus_per_trial
    context = {"gpus": max(1, int(gpus_in_trial)) if gpus_in_trial > 0 else 0}
    baseline = None
    if not plan.resume and plan.space.defaults.baseline:
        baseline = plan.space.baseline_point(context) or None
    if not plan.resume:
        study_dir.mkdir(parents=True, exist_ok=True)  # plan_search refused a non-empty one
        write_study_meta(study_dir, study_meta(plan, cluster, resources, baseline))
    else:
        meta = dict(plan.meta)
        meta.update(trials=plan.trials, resumed=[*meta.get("resumed", []),
                                                 datetime.now(timezone.utc).isoformat(timespec="seconds")])
        write_study_meta(study_dir, meta)

    storage = open_storage(plan.storage)
    n_before = reconcile_study(study_dir, storage, plan.study)
    records = load_trials(study_dir)
    remaining = plan.trials - len(records)
    train_seconds = [float(r["train_seconds"]) for r in records
                     if r.get("state") == "complete" and isinstance(r.get("train_seconds"), (int, float))]

    # A CPU trial on a GPU machine must say cpu (Ray does not hide GPUs from 0-GPU trials); elsewhere the
    # recorded config stays portable.
    device = "cuda" if gpus_in_trial > 0 else ("cpu" if cluster.gpus > 0 else "auto")
    base = {"workload": plan.workload, "dataset": plan.dataset, "budget": plan.budget.model_dump(exclude_none=True),
            "gpus": context["gpus"], "params": {"device": device}}
    setup = TrialSetup(space=plan.space, base=base, objectives=plan.objectives, study_dir=str(study_dir),
                       cache_dir=str(plan.reports_dir / CACHE_DIR), engine=opts.engine,
                       ddp_workers=resources.ddp_workers, ddp_use_gpu=gpus_in_trial > 0,
                       ddp_cpus_per_worker=max(1.0, float(int((resources.cpus_per_trial - 1) //
                                                              max(resources.ddp_workers, 1)))))
    # Seeded, but shifted by the trials already in the study, so a resumed search does not replay the same draws.
    sampler = make_sampler(plan.sampler, plan.seed + n_before, plan.trials, opts.startup_trials)
    optuna.logging.set_verbosity(optuna.logging.INFO if opts.verbose else optuna.logging.WARNING)
    with warnings.catch_warnings():
        if not opts.verbose:
            warnings.simplefilter("ignore")
        searcher = StudySearcher(plan.space, plan.objectives, context=context, budget=plan.budget,
                                 sampler=sampler, storage=storage, study_name=plan.study,
                                 train_seconds=train_seconds, fixed_wall_limit_s=opts.wall_limit_s,
                                 baseline=baseline)

    view = None
    if console is not None:
        budget = plan.budget.describe()
        console.print(f"study [bold]{plan.study}[/bold]: {plan.trials} trials of {plan.workload} on {plan.dataset}, "
                      f"{budget} each, sampler {plan.sampler} (seed {plan.seed}); {resources.describe()}"
                      + (f"; resuming with {len(records)} done" if plan.resume else ""), soft_wrap=True)
        view = SearchView(console, plan.trials, len(records), [o.metric for o in plan.objectives],
                          plan.space.searched)
    recorder = StudyRecorder(study_dir, view)

    if resources.ddp_workers > 1:
        trial_resources: dict[str, float] = {"cpu": 1}
    else:
        trial_resources = {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}
    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), trial_resources)
    run_name = "run-" + datetime.now().strftime("%Y%m%d-%H%M%S")
    tuner = tune.Tuner(
        fn,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=remaining,
                                    max_concurrent_trials=resources.concurrency, reuse_actors=True,
                                    trial_name_creator=trial_name, trial_dirname_creator=trial_name),
        run_config=tune.RunConfig(name=run_name, storage_path=str(study_dir / RAY_DIR),
                                  verbose=1 if opts.verbose else 0, callbacks=[recorder],
                                  failure_config=tune.FailureConfig(max_failures=0)),
    )
    loggers = _quiet_loggers(opts.verbose)
    if view is not None:
        view.start()
    try:
        with warnings.catch_warnings():
            if not opts.verbose:
                warnings.simplefilter("ignore")
            tuner.fit()
    finally:
        if view is not None:
            view.stop()
        for name, level in loggers.items():
            logging.getLogger(name).setLevel(level)
        for number in searcher.unfinished():  # stopped by Ctrl-C before reporting: FAIL, rerun on --resume
            _fail_trial(searcher.study, number)
    records = load_trials(study_dir)
    return _summary(plan, records, ran=len(recorder.recorded), t0=t0, interrupted=len(records) < plan.trials,
                    notes=resources.warnings)


def trial_name(trial: Any) -> str:
    """Ray's name and folder for a trial: the study's trial number (Ray's default embeds every param)."""
    from tuner.search.trainable import TRIAL_KEY

    number = trial.config.get(TRIAL_KEY)
    return f"trial-{int(number):04d}" if number is not None else f"trial-{trial.trial_id}"


def _fail_trial(study: Any, number: int) -> None:
    from optuna.trial import TrialState

    try:
        trial = study.get_trials(deepcopy=False)[number]
        if trial.state == TrialState.RUNNING:
            study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    except Exception:  # best effort: --resume does the same
        pass


def _quiet_loggers(verbose: bool) -> dict[str, int]:
    """Silence Ray Tune's own warnings (e.g. its 'resume with Tuner.restore' hint, which is not how tuner
    resumes) unless --verbose; returns the previous levels to restore."""
    names = ["ray", "ray.tune", "ray.train", "ray.tune.tune", "ray.tune.execution.tune_controller"]
    before = {n: logging.getLogger(n).level for n in names}
    if not verbose:
        for n in names:  # CRITICAL: Tune logs every failed trial at ERROR; tuner reports them itself
            logging.getLogger(n).setLevel(logging.CRITICAL)
    return before


def _summary(plan: SearchPlan, records: list[dict[str, Any]], *, ran: int, t0: float, interrupted: bool,
             notes: list[str]) -> SearchSummary:
    from tuner.report.pareto import Objective as ParetoObjective
    from tuner.report.pareto import pareto_ranks

    objectives = [ParetoObjective(o.metric, o.direction) for o in plan.objectives]
    ranks = pareto_ranks(records, objectives)
    front = [r for r in records if ranks.get(int(r["trial"])) == 0]
    front.sort(key=lambda r: [(-1 if o.maximize else 1) * float(r[o.metric]) for o in objectives])
    return SearchSummary(
        study=plan.study, study_dir=plan.study_dir, storage=plan.storage, objectives=plan.objectives,
        params=plan.space.searched, total=plan.trials, finished=len(records), ran=ran,
        states=dict(Counter(str(r.get("state")) for r in records)), front=front,
        seconds=time.perf_counter() - t0, interrupted=interrupted, warnings=list(notes),
    )
