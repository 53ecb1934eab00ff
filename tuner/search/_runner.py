"""`tuner search` as a library call: `run_search(SearchOptions(...)) -> SearchSummary`.

Order of work, so that bad input never starts Ray or touches disk:
  1. plan_search() (tuner.search._options): validate and resolve everything; pure.
  2. Count the machine's GPUs (or join the cluster with --address) and decide per-trial resources and
     concurrency (tuner.search._resources).
  3. Create (or reconcile, on --resume) the study folder and the Optuna study (tuner.search._storage), then run a
     Ray Tune Tuner whose searcher is a StudySearcher over that Optuna study.

Resume does not replay Ray's experiment state: Ray checkpoints it periodically, so after kill -9 it can lag
behind trials that already finished. The Optuna database is written at every tell, so it is the source of truth,
and a new Ray experiment runs the remaining trials against the same study, so the sampler sees all before it.

Over 700 lines because it is the one place that orders a study's phases (probes, search, confirmation) and their
Ray experiments; each phase's own logic lives in its module (options, resources, context, storage, probe,
searcher, trainable, confirm, summary).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from tuner.files import check_writable
from tuner.errors import Interrupted
from tuner.search._allowance import margin
from tuner.search._context import cpu_facts, cpu_precision_notes, device_facts_for, trial_context
from tuner.space import Space, domains_of, study_space
from tuner.search._caches import built_note, cache_entries
from tuner.search._check import check_plan
from tuner.search._objectives import objective_note
from tuner.search._options import RESOURCE_OPTIONS, SearchOptions, SearchPlan, trial_base
from tuner.search._plan import plan_search
from tuner.search._outcome import wall_limit
from tuner.search._busy import check_machine
from tuner.search._probe import plan_loaders, stored_loader_plan
from tuner.search._resources import ClusterInfo, Resources, local_cluster, ray_cluster, resolve_resources
from tuner.search._shared_cache import WARN_BYTES, SharedFiles
from tuner.search._stop import StopSignals
from tuner.search._summary import SearchSummary
from tuner.search._trainable import trainable  # a module global: the tests' seam for their own engine
from tuner.search._storage import (
    keep_secret,
    kept_url,
    open_optuna_study,
    open_storage,
    reconcile_study,
    storage_failure,
    stored_storage,
)
from tuner.study import StudyMeta, hardware, versions
from tuner.analysis import Study, read_records


def make_sampler(name: str, seed: int, trials: int, startup: int | None) -> Any:
    """The Optuna sampler `tuner search` uses (also what the efficiency benchmark asks)."""
    import optuna

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "nsga2":
        population = max(4, min(50, trials // 3))
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
    n_startup = startup if startup is not None else max(3, min(10, trials // 3))
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, n_startup_trials=n_startup, multivariate=True)


@dataclass
class StudySetup:
    """What the study runs with once its resources are known: the space resolved for its trials, the context its
    conditions see, the FID cache shipped to every trial, and notes and warnings to print."""

    space: Space
    context: dict[str, Any]
    shared: SharedFiles | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # information, printed as `note:` (the effective batch kept,
    # why bf16 is not offered on this CPU)

    def tell(self, console: Any) -> None:
        """Print the notes as notes and the warnings as warnings (they were one list: the kept effective batch
        printed as a warning)."""
        from rich.markup import escape

        for prefix, lines in (("note", self.notes), ("warning", self.warnings)):
            for line in lines:
                console.print(f"[yellow]{prefix}:[/yellow] {escape(line)}", soft_wrap=True)


def study_meta(plan: SearchPlan, cluster: ClusterInfo, resources: Resources,
               baseline: dict[str, Any] | None, setup: StudySetup | None = None,
               allowance: dict[str, Any] | None = None) -> StudyMeta:
    params = setup.space.reachable(setup.context) if setup is not None else plan.space.searched
    return StudyMeta(
        name=plan.study, space=plan.space.name, space_source=plan.space.source, space_def=plan.space.definition(),
        params=params, objectives=plan.objectives, workload=plan.workload.text,
        workload_options=plan.workload_options, dataset=plan.dataset,
        budget=plan.budget.model_dump(exclude_none=True), trials=plan.kept_trials or plan.trials,
        sampler=plan.sampler, seed=plan.seed,
        baseline={"trial": 0, "params": baseline} if baseline else None,
        storage=stored_storage(kept_url(plan.storage), plan.study_dir), id=uuid.uuid4().hex,
        created=_now(), hardware=hardware(cluster.cpus, cluster.gpus, cluster.nodes),
        resources={"cpus_per_trial": resources.cpus_per_trial, "gpus_per_trial": resources.gpus_per_trial,
                   "concurrency": resources.concurrency, "asked": asked_resources(plan.options)},
        versions=versions(), confirm={"trials": plan.confirm_trials, "repeats": plan.confirm_repeats},
        context=setup.context if setup is not None else None,
        domains=domains_of(setup.space) if setup is not None else None,
        fid_cache=setup.shared.manifest if setup is not None and setup.shared is not None else None,
        scheduler=plan.scheduler.to_json(), preflight=plan.preflight if plan.preflight.timed() else None,
        allowance=allowance, horizon=plan.horizon,
        **({"target": plan.target.model_dump()} if plan.target is not None else {}),  # how it was set: source
    )


def asked_resources(opts: SearchOptions) -> dict[str, Any]:
    """The resource options the user gave (--concurrency, --cpus-per-trial, --gpus-per-trial): --resume keeps
    them unless given again; what was derived from the machine is derived again where the study resumes."""
    return {k: v for k in RESOURCE_OPTIONS if (v := getattr(opts, k)) is not None}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_search(opts: SearchOptions, console: Any = None, view: Any = None) -> SearchSummary:
    """Run a study as `tuner search` does: plan, check resources, create or resume the study, probe, run the
    trials, confirm the pick, and summarize.

    The study's lock is held throughout, so a second search of the same study is refused; SIGINT and SIGTERM stop
    it the same way (`interrupted` in the summary, the finished trials kept for `resume`). Everything the study
    produces is in `summary.study_dir` (see Files a study writes).

    Args:
        opts: the search's options, as `tuner search` takes them.
        console: a rich Console that gets the warnings and notes; None runs silently.
        view: with `console`, `view(console, trials, done, objectives, params)` builds the live view on it (the
            CLI's tuner.cli.progress.SearchView); None shows none.

    Returns:
        The study as it stands at the end of the call, with what this call ran and the verdict on the pick.

    Raises:
        tuner.errors.UserError: bad input (an option, the space, the workload, a study that exists), found
            before anything is written; its subclasses map to `tuner`'s exit statuses.
        tuner.errors.Interrupted: interrupted before the study started (nothing was kept).

    Example:
        ```python
        from pathlib import Path

        from tuner.search import SearchOptions, run_search

        summary = run_search(SearchOptions(space="amp_loader", trials=4, budget_samples=640, confirm=0,
                                           reports_dir=Path("reports")))
        print(summary.complete, "of", summary.total, "trials complete in", round(summary.seconds), "s")
        verdict = summary.verdict  # None when no trial completed
        if verdict is not None:
            print(verdict.text)  # "pick: trial 3 (knee): 1.21x faster than the baseline ..."
        ```
    """
    from tuner.study import lock_study

    t0, started = time.perf_counter(), time.time()
    plan = plan_search(opts)
    # A busy machine: said (or waited out, or refused: then nothing is written) before anything starts; the
    # sample and the user's own speed environment go into study.json (`machine`)
    if not opts.address:
        _end_stale_ray(console)  # a killed study's leftover agents: ended before the machine's load is sampled
    machine = check_machine(opts.busy, opts.busy_wait_seconds, console, local=not opts.address)
    check_writable(plan.study_dir, "the study folder")  # a full disk or a read-only folder: one line, before Ray
    stop = StopSignals()
    stop.install()
    lock = lock_study(plan.study_dir, plan.study, new=not plan.resume)  # held until the search ends
    try:
        # on --resume, with its kept options
        summary = _locked_search(plan, plan.options, console, t0, stop, view, machine)
        summary.started = started
        return summary
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside Tune's loop (the probes, the pre-flight)
        if lock.lost():
            raise study_gone(plan, lock) from None
        if not plan.folder.exists():
            raise Interrupted("interrupted before the study started; nothing was kept", stop.exit_code) from None
        study = Study.load(plan.folder)
        return SearchSummary(study, ran=0, total=len(study.records) if plan.kept_trials else plan.trials,
                             seconds=time.perf_counter() - t0, interrupted=True, exit_code=stop.exit_code,
                             as_many_as_fit=bool(plan.kept_trials))
    except Exception as err:  # whatever failed first (Optuna's database, a write, a read), a deleted study is the cause
        if lock.lost():
            raise study_gone(plan, lock) from None
        full = storage_failure(err, plan.study_dir)  # a full disk: one line naming the folder, not a traceback
        if full is not None:
            raise full from None
        raise
    finally:
        stop.restore()
        if lock.lost():
            lock.clear_lost()
        elif plan.folder.exists() or not plan.folder.path.is_dir():
            lock.release()
        else:
            lock.abandon()  # bad input found after the claim: leave no folder behind


def study_gone(plan: SearchPlan, lock: Any) -> Exception:
    """The study folder was deleted while the search ran: one line (exit 2), once what Ray made again in its place
    is removed (tuner.study.lock.StudyLock.clear_lost), so the name can start a new study."""
    left = lock.clear_lost()
    err = plan.folder.gone()
    if left:
        names = ", ".join(p.name for p in left[:5])
        err = type(err)(f"{err}; {plan.folder.path} now holds {names}, which tuner did not write: move it away first")
    return err


def trial_device(opts: SearchOptions, cluster: Any, plan: SearchPlan) -> Any:
    """The device this machine's trials train on (their GPU kind, or the CPU), where the pre-flight times the step
    the budget is checked against; None for a cluster's trials or a resume (no budget check). Timing on a GPU
    leaves this driver a CUDA context (a few hundred MB) beside the trials."""
    if cluster is None or plan.resume:
        return None
    from tuner.device import resolve_device

    return resolve_device("cuda" if resolve_resources(opts, cluster).gpus_per_trial > 0 else "cpu")


def _locked_search(plan: SearchPlan, opts: SearchOptions, console: Any, t0: float,
                   stop: StopSignals, make_view: Any = None, machine: Any = None) -> SearchSummary:
    from rich.markup import escape

    from tuner.search._ray_env import join_ray, quiet_ray_environment, start_local_ray, stop_ray

    quiet_ray_environment()
    cluster = None
    if not opts.address:
        cluster = local_cluster()
        check_space_fits(plan, resolve_resources(opts, cluster))  # impossible asks are refused before Ray starts
    if plan.resume:
        plan = replace(plan, loaders=stored_loader_plan(plan.folder.probes_path))  # a damaged file: refused first
        early = _resume_without_work(plan, console, t0)
        if early is not None:
            return early
    device = trial_device(opts, cluster, plan)
    cached, t_check = cache_entries(plan.cache_dir), time.perf_counter()
    plan = check_plan(plan, device)  # a bad workload: one line on stderr; the budget the trials run
    # a first study on this machine: what the pre-flight built for it (the FID cache, a dataset), said as it starts
    built = built_note(cached, cache_entries(plan.cache_dir), time.perf_counter() - t_check, plan.cache_dir)
    allowance = None
    if opts.study_seconds is not None:
        from tuner.search._allowance import Allowance, confirm_runs

        assert plan.preflight_s is not None
        allowance = Allowance(opts.study_seconds, started=t0, trial_s=plan.preflight_s,
                              confirm_runs=confirm_runs(plan.confirm_trials, plan.confirm_repeats))
        if device is not None or plan.budget.seconds is not None:  # a samples budget timed elsewhere: no refusal
            allowance.check_fits()  # too short for one trial and the confirmation: one line, nothing written
    # the space's default budget raised to what the pre-flight measured; the slowest step
    notes = [line for line in (built, objective_note(plan), plan.sized, plan.heavy_note, plan.batch_note,
                               plan.eval_note) if line]
    if console is not None:
        for line in notes:
            console.print(f"[yellow]note:[/yellow] {escape(line)}", soft_wrap=True)
    shared = shared_fid_cache(plan)

    import ray

    from tuner.workload import shipment

    started = not ray.is_initialized()
    if started:
        shipped = shipment(plan.workload)
        modules = shipped.paths
        if opts.address and shipped.note:  # a local Ray's workers import the original file
            notes.append(shipped.note)
            if console is not None:
                console.print(f"[yellow]note:[/yellow] {escape(shipped.note)}", soft_wrap=True)
        if opts.address:
            join_ray(opts.address, verbose=opts.verbose, py_modules=modules)
        else:
            assert cluster is not None
            start_local_ray(cluster.cpus, cluster.gpus, verbose=opts.verbose, py_modules=modules)
        stop.install()  # over the handler ray.init set
    try:
        if opts.address or not started:
            cluster = ray_cluster()
        assert cluster is not None
        resources = resolve_resources(opts, cluster)
        summary = _run(plan, cluster, resources, prepare_study(plan, cluster, resources, shared), console, t0,
                       make_view, allowance, machine)
        summary.exit_code = stop.exit_code
        summary.notes = [*notes, *summary.notes]
        return summary
    finally:
        if started:
            stop_ray(local=not opts.address)


def _end_stale_ray(console: Any) -> None:
    """End what a killed study's local Ray left running (its agents and workers outlived a kill -9 of the driver by
    about 275 s, holding memory and CPU the next study measures beside), before this study counts the machine."""
    from tuner.search._ray_env import end_stale_sessions

    ended = end_stale_sessions()
    if ended and console is not None:
        console.print(f"[yellow]note:[/yellow] ended {len(ended)} Ray process{'es' if len(ended) != 1 else ''} a "
                      f"killed study's local Ray left running", soft_wrap=True)


def check_space_fits(plan: SearchPlan, resources: Resources) -> None:
    """Refuse, before Ray starts, a space whose domains come out empty for these trials' resources (and, for CPU
    trials, whose device facts are known here: a space left with nothing to search). A resumed study keeps the
    domains it started with, so it has nothing to check."""
    if plan.meta is not None and plan.meta.domains:
        return
    facts = cpu_facts() if resources.gpus_per_trial <= 0 else None  # GPU facts need the probe (Ray)
    plan.space.resolve(trial_context(resources, facts))


def shared_fid_cache(plan: SearchPlan) -> SharedFiles | None:
    """The FID cache the pre-flight check built in the driver, to ship to every trial (tuner.search._shared_cache);
    None when the study does not score quality or nothing was cached."""
    if not plan.quality_settings().enabled:
        return None
    files = SharedFiles.collect(plan.cache_dir)
    return files if files.files else None


def prepare_study(plan: SearchPlan, cluster: ClusterInfo, resources: Resources,
                  shared: SharedFiles | None) -> StudySetup:
    """Resolve the space for the trials' resources and device (stored domains on --resume), and collect the
    warnings the user should see: resources shared, hardware that differs from the study's first run, an FID
    extractor that changed since then, a large cache to ship."""
    facts, notes = device_facts_for(resources, cluster, remote=bool(plan.options.address))
    studied = study_space(plan.space, trial_context(resources, facts), plan.meta)
    space, context = studied.space, studied.context
    # why bf16 is not offered on this CPU: information, a note (it printed as `warning:`)
    fresh = [] if plan.meta is not None and plan.meta.domains else cpu_precision_notes(plan.space, context)
    notes = [*resources.warnings, *notes, *studied.warnings]
    if shared is not None:
        saved = plan.meta.fid_cache if plan.meta is not None else None
        if saved and saved != shared.manifest:
            notes.append("the FID cache differs from the one this study started with (it was rebuilt or another "
                         "dataset was added): FIDs of the trials run now may not compare with the earlier ones")
        if shared.size > WARN_BYTES:
            notes.append(f"shipping {shared.size / 2**20:.0f} MiB of FID cache ({plan.cache_dir / 'fid'}) to every "
                         f"trial; delete the folders of datasets you no longer study to ship less")
    return StudySetup(space=space, context=context, shared=shared, warnings=notes, notes=[*studied.notes, *fresh])


def _only_distinct(plan: SearchPlan, meta: StudyMeta, space: Space, context: dict[str, Any], loaders: Any,
                   done: int, console: Any) -> tuple[int, StudyMeta, SearchPlan]:
    """The trials left once the probes decided every knob the space searches: as many as there are distinct
    configs (the baseline's and the probes' pick), not --trials copies of one config; the study's count is
    rewritten, so the report and --resume see the study as whole."""
    from tuner.search._probe import configs_left

    configs = configs_left(space, context, loaders, (meta.baseline or {}).get("params"))
    if configs is None or len(configs) >= plan.trials:
        return plan.trials - done, meta, plan
    if console is not None:
        which = ", ".join(n for n in space.reachable(context) if n in loaders.knobs)
        same = " (the baseline's knobs are the probes' pick)" if len(configs) == 1 and meta.baseline else ""
        console.print(f"the probes decided every knob this space searches ({which}): {len(configs)} "
                      f"config{'s' if len(configs) != 1 else ''} to measure{same}, so {len(configs)} "
                      f"trial{'s' if len(configs) != 1 else ''} instead of {plan.trials}", soft_wrap=True)
    plan = replace(plan, trials=len(configs), kept_trials=None)
    meta = meta.model_copy(update={"trials": plan.trials})
    plan.folder.write_meta(meta)
    return max(0, plan.trials - done), meta, plan


def _resume_without_work(plan: SearchPlan, console: Any, t0: float) -> SearchSummary | None:
    from tuner.search._confirm import next_knee, pending

    reconcile_study(plan.folder, open_storage(plan.storage), plan.optuna_name)
    study = Study.load(plan.folder)
    if len(study.records) < plan.trials or pending(study, plan.confirm_trials, plan.confirm_repeats) \
            or (plan.confirm_repeats > 0 and next_knee(study, plan.confirm_trials) is not None):
        return None
    if console is not None:
        console.print(f"study '{plan.study}' already has {len(study.records)} of {plan.trials} trials; nothing to "
                      f"run (raise --trials to run more)", soft_wrap=True)
    return SearchSummary(study, ran=0, total=plan.trials, seconds=time.perf_counter() - t0)


def _machine_record(plan: SearchPlan, meta: StudyMeta, machine: Any) -> StudyMeta:
    """study.json's `machine`: the user's own speed environment (tuner.config.SPEED_ENV, kept as it was) and what
    other processes took of the machine in the sample before this invocation (tuner.search._busy)."""
    from tuner.config import speed_env

    record: dict[str, Any] = {"environment": speed_env(os.environ)}
    if machine is not None:
        record.update(others_share=machine.share, others_cpus=machine.others_cpus, load1=machine.load1,
                      cpus=machine.cpus, sampled_s=machine.seconds)
    meta = meta.model_copy(update={"machine": record})
    plan.folder.write_meta(meta)
    return meta


def _write_meta(plan: SearchPlan, cluster: ClusterInfo, resources: Resources,
                baseline: dict[str, Any] | None, setup: StudySetup, storage: Any,
                allowance: dict[str, Any] | None = None) -> StudyMeta:
    """study.json, after the Optuna study that carries its id (so a study.json always has its database).
    `allowance`: this invocation's --study-seconds (each invocation has its own; a resume without one leaves the
    last one's record)."""
    directions = [o.direction or "minimize" for o in plan.objectives]
    if not plan.resume:
        meta = study_meta(plan, cluster, resources, baseline, setup, allowance)
        assert meta.id is not None
        keep_secret(plan.folder.path, plan.storage)  # study.json keeps the URL with its password masked
        open_optuna_study(storage, plan.optuna_name, meta.id, directions, [o.metric for o in plan.objectives])
        plan.folder.write_meta(meta)
        return meta
    else:
        assert plan.meta is not None
        study_id = plan.meta.id or uuid.uuid4().hex  # a study from before ids: it gets one now
        open_optuna_study(storage, plan.optuna_name, study_id, directions, [o.metric for o in plan.objectives])
        update: dict[str, Any] = {"trials": plan.kept_trials or plan.trials, "resumed": [*plan.meta.resumed, _now()],
                                  "confirm": {"trials": plan.confirm_trials, "repeats": plan.confirm_repeats},
                                  "id": study_id, "storage": stored_storage(kept_url(plan.storage), plan.study_dir)}
        if plan.horizon != plan.meta.horizon:  # --horizon (or --horizon-seeds) given again on this resume
            update["horizon"] = plan.horizon
        if plan.target is not None and plan.meta.target != plan.target.model_dump():  # set on this resume
            update["target"] = plan.target.model_dump()
        if not plan.meta.domains:  # a study started before domains were stored: fix them from now on
            update.update(context=setup.context, domains=domains_of(setup.space))
        keep_secret(plan.folder.path, plan.storage)  # a study.json once written with the password in clear: now masked
        if allowance is not None:  # this invocation's; a resume without one leaves the last one's record
            update["allowance"] = allowance
        if not plan.meta.fid_cache and setup.shared is not None:
            update["fid_cache"] = setup.shared.manifest
        meta = plan.meta.model_copy(update=update)
        plan.folder.write_meta(meta)
        return meta


def _run(plan: SearchPlan, cluster: ClusterInfo, resources: Resources, prepared: StudySetup, console: Any,
         t0: float, make_view: Any = None, allowance: Any = None, machine: Any = None) -> SearchSummary:
    import optuna
    from ray import tune
    from rich.markup import escape

    from tuner.search._phases import PhasedSearcher
    from tuner.search._recorder import StudyRecorder
    from tuner.search._rungs import make_scheduler
    from tuner.search._searcher import StudySearcher
    from tuner.search._trial import TrialSetup, budget_limits, scored, trained
    from tuner.search._watch import TrialWatch

    opts = plan.options
    if console is not None:
        prepared.tell(console)
    gpus_in_trial = resources.gpus_per_trial
    space, context = prepared.space, prepared.context
    baseline = None
    if not plan.resume and space.defaults.baseline:
        baseline = space.baseline_point(context, own=plan.own) or None
    optuna.logging.set_verbosity(optuna.logging.INFO if opts.verbose else optuna.logging.WARNING)
    # A CPU trial on a GPU machine must say cpu (Ray does not hide GPUs from 0-GPU trials); elsewhere the
    # recorded config stays portable.
    device = "cuda" if gpus_in_trial > 0 else ("cpu" if cluster.gpus > 0 else "auto")
    base = trial_base(plan, trial_context(resources, None)["gpus"], device)
    if plan.target is not None and plan.target.value is None:  # --target baseline: set before study.json is
        from tuner.search._probe import probes_in_process  # written, so a target it cannot set leaves no study
        from tuner.search._reference import reference_run
        from tuner.target import derive_study_target

        plan = derive_study_target(plan, space, context, base, console,
                                   reference_run(resources, in_process=probes_in_process(plan, resources)))
        base = trial_base(plan, trial_context(resources, None)["gpus"], device)
    storage = open_storage(plan.storage)
    meta = _write_meta(plan, cluster, resources, baseline, prepared, storage,
                       allowance.to_json() if allowance is not None else None)
    meta = _machine_record(plan, meta, machine)
    n_before = reconcile_study(plan.folder, storage, plan.optuna_name)
    # The baseline stays pending until it has a record: a kill during it, or an interrupt before it started,
    # leaves it to --resume, which runs it before any sampled trial (enqueued again unless Optuna still holds it).
    pending_baseline = plan.resume and meta.baseline is not None and meta.baseline.get("params") is not None \
        and not plan.folder.has_record(int(meta.baseline.get("trial", -1)))
    if pending_baseline and not _waiting_trials(storage, plan.optuna_name):
        baseline = dict(meta.baseline["params"])  # type: ignore[index]
    records = read_records(plan.folder)
    remaining = plan.trials - len(records)
    train_seconds = trained(records)

    setup = TrialSetup(space=space, base=base, objectives=plan.objectives, study_dir=str(plan.study_dir),
                       cache_dir=str(plan.cache_dir),
                       ddp_workers=resources.ddp_workers, ddp_use_gpu=gpus_in_trial > 0,
                       ddp_cpus_per_worker=float(resources.cpus_per_process), shared_files=prepared.shared,
                       reruns=plan.confirm_trials > 0 and plan.confirm_repeats > 0,
                       driver_host=socket.gethostname(), cpus=int(resources.cpus_per_process),
                       busy_wait_s=opts.busy_wait_seconds if opts.busy == "wait" else None,
                       baseline_trial=None if meta.baseline is None else int(meta.baseline.get("trial", 0)))
    parity = None
    if remaining > 0 and resources.ddp_workers <= 1:  # numerics against fp32, before the probes (parity.json)
        from tuner.parity import plan_parity
        from tuner.search._hang import end_on_setup_timeout
        from tuner.search._probe import probes_in_process

        parity = plan_parity(plan, space, context, base, resources, console,
                             in_process=probes_in_process(plan, resources), allowance=allowance,
                             ends_study=end_on_setup_timeout)
    # The probes decide the speed knobs, the numerics parity passed, and an exact split (tuner.search._probe).
    loaders = plan_loaders(plan, space, context, base, resources, console, parity) if remaining > 0 else None
    if loaders is not None and remaining > 0:
        remaining, meta, plan = _only_distinct(plan, meta, space, context, loaders, len(records), console)
    # Seeded, but shifted by the trials already in the study, so a resumed search does not replay the same draws.
    sampler = make_sampler(plan.sampler, plan.seed + n_before, plan.trials, opts.startup_trials)
    with warnings.catch_warnings():
        if not opts.verbose:
            warnings.simplefilter("ignore")
        searcher = StudySearcher(space, plan.objectives, context=context, budget=plan.budget,
                                 sampler=sampler, storage=storage, study_name=plan.optuna_name,
                                 train_seconds=train_seconds, fixed_wall_limit_s=opts.wall_limit_s,
                                 score_seconds=scored(records),
                                 baseline=baseline, loaders=loaders, study_dir=plan.study_dir,
                                 rungs=list(plan.scheduler.rungs), limits=budget_limits(plan.preflight),
                                 allowance=allowance)
    # fifo: Tune's default. asha: ParetoASHA over the study's objectives, with the rung entries the folder kept
    # (after reconcile_study, so a trial running at a kill brings none back).
    scheduler = make_scheduler(plan.scheduler, plan.objectives, plan.folder)
    if pending_baseline:
        waiting = _waiting_trials(storage, plan.optuna_name)
        if waiting:  # the number the baseline runs under now
            plan.folder.write_meta(meta.model_copy(update={"baseline": {**meta.baseline, "trial": min(waiting)}}))

    view = None
    if console is not None:
        on = f" on {plan.dataset}" if plan.dataset else ""
        count = "as many trials as fit" if plan.kept_trials else \
            f"{plan.trials} trial{'s' if plan.trials != 1 else ''}"
        if allowance is not None:
            count += f" in {allowance.seconds:g} s (+{margin(allowance.seconds):.0f} s margin)"
        console.print(f"study [bold]{plan.study}[/bold]: {count} of {escape(plan.workload.text + on)}, "
                      f"{plan.budget.describe()} each, sampler {plan.sampler} (seed {plan.seed}"
                      + (f", scheduler {plan.scheduler.describe()}" if scheduler is not None else "") + "); "
                      f"{resources.describe(plan.trials)}" + (f"; resuming with {len(records)} done" if plan.resume
                                                               else ""),
                      soft_wrap=True)
        fitted = [f"{n} {space.params[n].describe()}" for n, spec in plan.space.params.items() if spec.unresolved]
        if fitted:
            console.print(escape(f"fitted to these trials ({_trial_words(context)}): " + "; ".join(fitted)),
                          soft_wrap=True)
        if make_view is not None:
            view = make_view(console, plan.trials, len(records), plan.objectives, space.reachable(context))
            if allowance is not None and hasattr(view, "set_deadline"):
                view.set_deadline(allowance.deadline, bounded=not plan.kept_trials)
    if resources.ddp_workers > 1:
        trial_resources: dict[str, float] = {"cpu": 1}
    else:
        trial_resources = {"cpu": resources.cpus_per_trial, "gpu": resources.gpus_per_trial}
    fn = tune.with_resources(tune.with_parameters(trainable, setup=setup), trial_resources)
    recorder = StudyRecorder(plan.study_dir, view, searcher=searcher, scheduler=scheduler)
    confirmation = _Confirmation(plan, view, allowance, console)
    confirmation.search = searcher if remaining > 0 else None
    watch = TrialWatch(allowance)  # ends a trial past its limits, or every trial once the allowance is spent
    recorder.watch = confirmation.recorder.watch = watch
    phases = PhasedSearcher(searcher if remaining > 0 else None, remaining, confirmation.searcher)
    # One Tune run for the search and the confirmation (tuner.search._phases): a run of its own for the re-runs
    # paid Tune's start-up and a fresh trial process again. num_samples=-1: the searcher says when it is done.
    tuner = tune.Tuner(
        fn,
        tune_config=tune.TuneConfig(search_alg=phases, scheduler=scheduler, num_samples=-1,
                                    max_concurrent_trials=resources.concurrency, reuse_actors=True,
                                    trial_name_creator=trial_name, trial_dirname_creator=trial_name),
        run_config=_run_config("run", plan, opts.verbose, [watch, recorder, confirmation.recorder]),
    )
    try:
        _fit(tuner, view, opts.verbose)
    finally:
        dropped = searcher.unfinished() if remaining > 0 else []
        if remaining > 0:
            searcher.fail_unfinished()  # stopped by Ctrl-C before reporting: FAIL, rerun on --resume
    if remaining > 0 and searcher.storage_failed is not None:  # Optuna was not told a trial: never a clean end
        raise searcher.storage_failed
    ran = len(recorder.recorded)
    if allowance is not None and allowance.ended and console is not None and not phases.confirm_started:
        console.print(allowance.ending(), soft_wrap=True)
    if remaining > 0 and searcher.hung and console is not None and not phases.confirm_started:
        console.print(escape(searcher.hung), soft_wrap=True)
    study = Study.load(plan.folder)
    if remaining > 0 and not dropped and not study.records and allowance is not None and allowance.ended:
        from tuner.errors import BudgetError

        # the pre-flight's check passed, but what came after it (the probes, the parity check) left no trial room
        raise BudgetError(f"no trial started: {allowance.ending()}; give a longer --study-seconds with --resume")
    interrupted = bool(dropped) or _cut_short(study, plan, allowance, searcher if remaining > 0 else None)
    reruns_hung = getattr(confirmation.reruns, "hung", None)
    if not interrupted:  # a re-run's set-up timeout ended the confirmation (reruns_hung): not a signal
        interrupted = not reruns_hung and not confirmation.finished(phases)
        noise = study.noise()
        if noise is not None:  # the study's own noise floor, kept with the study
            plan.folder.write_meta(study.meta.model_copy(update={"noise": noise.to_json()}))
            study = Study.load(plan.folder)
    if allowance is not None:  # what the allowance came to: the wall time spent, whether it ended the search
        plan.folder.write_meta(study.meta.model_copy(
            update={"allowance": allowance.to_json(spent=time.perf_counter() - t0)}))
        study = Study.load(plan.folder)
    # "as many as fit" (no --trials): no count was asked for; the trials that ran are the total, interrupted or not
    total = len(study.records) if plan.kept_trials else plan.trials
    return SearchSummary(study, ran=ran, total=total, seconds=time.perf_counter() - t0,
                         interrupted=interrupted, warnings=list(prepared.warnings), notes=list(prepared.notes),
                         as_many_as_fit=bool(plan.kept_trials),
                         ended=reruns_hung or (searcher.hung if remaining > 0 else None))


def _waiting_trials(storage: Any, name: str) -> list[int]:
    """Numbers of the study's enqueued trials not yet asked for (the baseline is the only one tuner enqueues)."""
    import optuna
    from optuna.trial import TrialState

    study = optuna.load_study(study_name=name, storage=storage)
    return [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))]


def _run_config(kind: str, plan: SearchPlan, verbose: bool, callbacks: list[Any]) -> Any:
    from ray import tune

    return tune.RunConfig(name=f"{kind}-" + datetime.now().strftime("%Y%m%d-%H%M%S"),
                          storage_path=str(plan.folder.ray_dir), verbose=1 if verbose else 0, callbacks=callbacks,
                          failure_config=tune.FailureConfig(max_failures=0))


def _fit(tuner: Any, view: Any, verbose: bool) -> None:
    from tuner.search._ray_env import quiet_loggers, restore_loggers

    loggers = quiet_loggers(verbose)
    if view is not None:
        view.start()
    try:
        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore")
            tuner.fit()
    finally:
        if view is not None:
            view.stop()
        restore_loggers(loggers)


def _cut_short(study: Study, plan: SearchPlan, allowance: Any, searcher: Any = None) -> bool:
    """Whether the search ended with trials missing (interrupted); with --study-seconds, fewer trials than the cap
    is the allowance's doing, not an interruption, and so is a search a set-up timeout ended (searcher.hung)."""
    ended = bool(allowance and allowance.ended) or bool(getattr(searcher, "hung", None))
    return len(study.records) < plan.trials and not ended


class _Confirmation:
    """The confirmation phase (tuner.search._confirm) once the search has ended, in the same Tune run
    (tuner.search._phases): the missing re-runs in their interleaved order (tuner.search._reruns); then, while the
    confirmed figures move the knee to a trial never re-run, that trial's re-runs (at most MAX_EXTRA of them, and
    with --study-seconds only while the time left holds them: the verdict then names the unconfirmed rival), so
    the export stands on confirmed figures.

    Each re-run runs in a fresh process, as `tuner train` runs the export: re-runs sharing one process agreed
    within 1% while fresh processes of the same config read 290-329 samples/s (a nanoGPT-style model on this CPU;
    benchmarks/results/retrain.md), so an interval from shared-process re-runs was too narrow to hold. The trial
    process forks each re-run from its import-only server (tuner.search._fresh): a fresh Ray actor per re-run cost
    about 2 s more of Ray's and Tune's turnover each, a fresh interpreter 2-3 s of imports."""

    def __init__(self, plan: SearchPlan, view: Any, allowance: Any, console: Any) -> None:
        from tuner.search._recorder import RerunRecorder

        self.plan, self.view, self.allowance, self.console = plan, view, allowance, console
        self.recorder = RerunRecorder(plan.study_dir, plan.storage, plan.optuna_name, view)
        self.reruns: Any = None  # the RerunSearcher, once the search ended with re-runs to do
        self.search: Any = None  # the search's StudySearcher (None: nothing was left to search)

    def searcher(self) -> Any:
        """Called by the Tune run's searcher when the search's last trial has ended: the re-runs' searcher, or None
        when the search was cut short (nothing to confirm on) or nothing is left to confirm."""
        from tuner.search._confirm import next_knee, pending
        from tuner.search._reruns import RerunSearcher
        from tuner.search._trial import budget_limits, learned_reserve, scored, trained

        plan, allowance = self.plan, self.allowance
        study = Study.load(plan.folder)
        if _cut_short(study, plan, allowance, self.search):
            return None  # an interrupted search is not confirmed (resume does both)
        if allowance is not None and allowance.ended and self.console is not None:
            self.console.print(allowance.ending(), soft_wrap=True)
        if getattr(self.search, "hung", None) and self.console is not None:
            from rich.markup import escape

            self.console.print(escape(self.search.hung), soft_wrap=True)
        first = pending(study, plan.confirm_trials, plan.confirm_repeats)
        if not first and (plan.confirm_repeats <= 0 or next_knee(study, plan.confirm_trials) is None):
            return None
        wall = plan.options.wall_limit_s or wall_limit(plan.budget, trained(study.records))
        limits = learned_reserve(budget_limits(plan.preflight), scored(study.records))
        self.reruns = RerunSearcher(plan.study_dir, plan.confirm_trials, plan.confirm_repeats, wall, self.view,
                                    limits=limits, allowance=allowance)
        return self.reruns

    def finished(self, phases: Any) -> bool:
        """After the run: whether the confirmation ran to its end with every re-run recorded (or had none to do);
        False when it was interrupted, or never began though the search ended."""
        if not phases.confirm_started:
            return False
        if self.reruns is None:
            return True
        return bool(self.reruns.done) and len(self.recorder.recorded) == self.reruns.issued


def rerun_name(trial: Any) -> str:
    from tuner.search._protocol import TrialOrder

    order = TrialOrder.from_config(trial.config)
    return f"trial-{order.trial:04d}-rerun-{int(order.repeat or 0)}"


def _trial_words(context: dict[str, Any]) -> str:
    gpus = context.get("gpus") or 0
    words = f"{context.get('cpus')} CPUs per process" + (f", {gpus} GPU" if gpus else "")
    return words + (f", {context['device']}" if context.get("device") else "")


def trial_name(trial: Any) -> str:
    """Ray's name and folder for a trial: the study's trial number (Ray's default embeds every param), and the
    repeat for a confirmation re-run."""
    from tuner.search._protocol import order_of

    order = order_of(trial.config)
    if order is not None and order.rerun:
        return rerun_name(trial)
    return f"trial-{order.trial:04d}" if order is not None else f"trial-{trial.trial_id}"
