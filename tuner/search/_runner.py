"""`tuner search` as a library call: `run_search(SearchOptions(...)) -> SearchSummary`.

Order of work, so that bad input never starts Ray or touches disk:
  1. plan_search() (tuner.search._plan): validate and resolve everything; pure; check_plan() (tuner.search._check).
  2. Count the machine's GPUs (or join the cluster with --address) and decide per-trial resources and
     concurrency (tuner.search._resources).
  3. Create (or reconcile, on --resume) the study folder and the Optuna study (tuner.search._storage), then run a
     Ray Tune Tuner whose searcher is a StudySearcher over that Optuna study.

Resume does not replay Ray's experiment state: Ray checkpoints it periodically, so after kill -9 it can lag
behind trials that already finished. The Optuna database is written at every tell, so it is the source of truth,
and a new Ray experiment runs the remaining trials against the same study, so the sampler sees all before it.

Each job the runner orders has its module: the study's set-up and study.json (tuner.search._setup), the sampler
(tuner.search._sampler), the probes (tuner.search._probe), the search's searcher (tuner.search._searcher), the
confirmation phase (tuner.search._reruns, deciding with tuner.search._confirm), the one Tune run
(tuner.search._tune_run), and the summary it returns (tuner.search._summary).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from typing import Any

from tuner.files import check_writable
from tuner.errors import Interrupted
from tuner.search._context import trial_context
from tuner.search._caches import built_note, cache_entries
from tuner.search._check import check_plan
from tuner.search._objectives import objective_note
from tuner.search._options import SearchOptions, SearchPlan, trial_base
from tuner.search._plan import plan_search
from tuner.search._busy import busy_warning, check_machine
from tuner.search._probe import plan_loaders, stored_loader_plan
from tuner.search._resources import ClusterInfo, Resources, local_cluster, ray_cluster, resolve_resources
from tuner.search._sampler import make_sampler
from tuner.search._setup import StudySetup, check_space_fits, machine_record, only_distinct, prepare_study, \
    shared_fid_cache, trial_setup, write_meta
from tuner.search._stop import StopSignals
from tuner.search._summary import SearchSummary, announce, closing
from tuner.search._trainable import trainable  # a module global: the tests' seam for their own engine
from tuner.search._journal import settle_storage
from tuner.search._storage import open_storage, reconcile_study, storage_failure
from tuner.analysis import Study, read_records


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
    if not plan.workload.builtin:
        # a workload that does not import or names no function: its one line alone, before the busy machine's
        # warning (the pre-flight's build then finds the module imported)
        from tuner.workload import factory_arguments, import_factory, probe_import

        probe_import(plan.workload)  # and a --dataset or --option the factory does not take, before the folder
        factory_arguments(plan.workload, import_factory(plan.workload), plan.workload_options, plan.dataset)
    # A busy machine: sampled before anything starts (waited out, or refused: then nothing is written), said once
    # the plan's checks pass; the sample and the user's own speed environment go into study.json (`machine`)
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
    notes = [line for line in (built, objective_note(plan), plan.optimizer_note, plan.sized, plan.heavy_note,
                               plan.batch_note, plan.eval_note) if line]
    if console is not None:
        if machine is not None and machine.busy:  # said once the plan's checks passed: bad input stays one line
            console.print(f"[yellow]warning:[/yellow] {escape(busy_warning(machine))}", soft_wrap=True)
        for line in notes:
            console.print(f"[yellow]note:[/yellow] {escape(line)}", soft_wrap=True)
    shared = shared_fid_cache(plan)

    import ray

    from tuner.workload import shipment

    started = not ray.is_initialized()
    try:  # a signal while Ray starts stops it too (tuner.search._stop)
        if started:
            shipped = shipment(plan.workload, leave_out=opts.reports_dir)  # not the studies' own output
            modules = shipped.paths
            if opts.address and shipped.note:  # a local Ray's workers import the original file
                notes.append(shipped.note)
                if console is not None:
                    console.print(f"[yellow]note:[/yellow] {escape(shipped.note)}", soft_wrap=True)
            if opts.address:
                join_ray(opts.address, verbose=opts.verbose, py_modules=modules, excludes=shipped.excludes)
            else:
                assert cluster is not None
                start_local_ray(cluster.cpus, cluster.gpus, verbose=opts.verbose, py_modules=modules,
                                excludes=shipped.excludes)
            stop.install()  # over any handler ray.init set
        if opts.address or not started:
            cluster = ray_cluster()
        assert cluster is not None
        resources = resolve_resources(opts, cluster)
        try:
            summary = _run(plan, cluster, resources, prepare_study(plan, cluster, resources, shared), console, t0,
                           make_view, allowance, machine)
        finally:
            settle_storage(plan.storage)  # study.db back to SQLite's default journal (open_storage's searching)
        summary.exit_code = stop.exit_code
        summary.notes = [*notes, *summary.notes]
        return summary
    finally:
        if started:  # a Ray half started by an interrupted ray.init included
            stop_ray(local=not opts.address)


def _end_stale_ray(console: Any) -> None:
    """End what a killed study's local Ray left running (its agents and workers outlived a kill -9 of the driver by
    about 275 s, holding memory and CPU the next study measures beside), before this study counts the machine."""
    from tuner.search._ray_sessions import end_stale_sessions

    ended = end_stale_sessions()
    if ended and console is not None:
        console.print(f"[yellow]note:[/yellow] ended {len(ended)} Ray process{'es' if len(ended) != 1 else ''} a "
                      f"killed study's local Ray left running", soft_wrap=True)


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


def _run(plan: SearchPlan, cluster: ClusterInfo, resources: Resources, prepared: StudySetup, console: Any,
         t0: float, make_view: Any = None, allowance: Any = None, machine: Any = None) -> SearchSummary:
    import optuna

    from tuner.search._phases import PhasedSearcher
    from tuner.search._recorder import StudyRecorder
    from tuner.search._reruns import Confirmation
    from tuner.search._rungs import make_scheduler
    from tuner.search._searcher import StudySearcher
    from tuner.search._trial import budget_limits, scored, trained
    from tuner.search._tune_run import make_tuner
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
        if plan.target_note:  # printed as it was derived; the summary (and --format json) lists it
            prepared.notes.append(plan.target_note)
        base = trial_base(plan, trial_context(resources, None)["gpus"], device)
    storage = open_storage(plan.storage, searching=True)
    meta = write_meta(plan, cluster, resources, baseline, prepared, storage,
                      allowance.to_json() if allowance is not None else None)
    meta = machine_record(plan, meta, machine)
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

    setup = trial_setup(plan, space, base, resources, prepared, meta)
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
        remaining, meta, plan = only_distinct(plan, meta, space, context, loaders, len(records), console)
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
                                 allowance=allowance, trials=plan.trials)
    # fifo: Tune's default. asha: ParetoASHA over the study's objectives, with the rung entries the folder kept
    # (after reconcile_study, so a trial running at a kill brings none back).
    scheduler = make_scheduler(plan.scheduler, plan.objectives, plan.folder)
    if pending_baseline:
        waiting = _waiting_trials(storage, plan.optuna_name)
        if waiting:  # the number the baseline runs under now
            plan.folder.write_meta(meta.model_copy(update={"baseline": {**meta.baseline, "trial": min(waiting)}}))

    view = None
    if console is not None:
        announce(console, plan, space, context, resources, len(records), allowance, scheduler is not None)
        if make_view is not None:
            view = make_view(console, plan.trials, len(records), plan.objectives, space.reachable(context))
            if allowance is not None and hasattr(view, "set_deadline"):
                view.set_deadline(allowance.deadline, bounded=not plan.kept_trials)
    recorder = StudyRecorder(plan.study_dir, view, searcher=searcher, scheduler=scheduler)
    confirmation = Confirmation(plan, view, allowance, console)
    confirmation.search = searcher if remaining > 0 else None
    watch = TrialWatch(allowance)  # ends a trial past its limits, or every trial once the allowance is spent
    recorder.watch = confirmation.recorder.watch = watch
    phases = PhasedSearcher(searcher if remaining > 0 else None, remaining, confirmation.searcher)
    # One Tune run for the search and the confirmation (tuner.search._phases, tuner.search._tune_run)
    tuner = make_tuner(trainable, setup, plan, resources, phases, scheduler,
                       [watch, recorder, confirmation.recorder], opts.verbose)
    try:
        _fit(tuner, view, opts.verbose)
    finally:
        dropped = searcher.unfinished() if remaining > 0 else []
        if remaining > 0:
            searcher.fail_unfinished()  # stopped by Ctrl-C before reporting: FAIL, rerun on --resume
    if remaining > 0 and searcher.storage_failed is not None:  # Optuna was not told a trial: never a clean end
        raise searcher.storage_failed
    return closing(plan, t0, ran=len(recorder.recorded), search=searcher if remaining > 0 else None,
                   dropped=dropped, confirmation=confirmation, phases=phases, allowance=allowance, console=console,
                   prepared=prepared)


def _waiting_trials(storage: Any, name: str) -> list[int]:
    """Numbers of the study's enqueued trials not yet asked for (the baseline is the only one tuner enqueues)."""
    import optuna
    from optuna.trial import TrialState

    study = optuna.load_study(study_name=name, storage=storage)
    return [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))]


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
