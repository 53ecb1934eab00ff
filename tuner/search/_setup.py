"""A study's set-up once its resources are known, before its first trial (tuner.search._runner orders it): the space
resolved for the trials' resources and device, the notes and warnings that go with it, the FID cache shipped to
every trial, and study.json as the study starts or resumes (its machine record, its trial count once the probes
decided every knob)."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from tuner.search._context import cpu_facts, cpu_precision_notes, device_facts_for, trial_context
from tuner.search._options import RESOURCE_OPTIONS, SearchOptions, SearchPlan
from tuner.search._resources import ClusterInfo, Resources
from tuner.search._shared_cache import WARN_BYTES, SharedFiles
from tuner.search._storage import keep_secret, kept_url, open_optuna_study, stored_storage
from tuner.space import Space, domains_of, study_space
from tuner.study import StudyMeta, hardware, versions


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


def trial_setup(plan: SearchPlan, space: Space, base: dict[str, Any], resources: Resources, prepared: StudySetup,
                meta: StudyMeta) -> Any:
    """What every trial of the study is handed (tuner.search._trial.TrialSetup): the resolved space and the base
    config, where the study's files are, its DDP layout, the FID cache to unpack, whether re-runs follow, this
    driver's host, the wait for a busy machine (--busy wait) and the baseline's trial number."""
    from tuner.search._trial import TrialSetup

    opts = plan.options
    return TrialSetup(space=space, base=base, objectives=plan.objectives, study_dir=str(plan.study_dir),
                      cache_dir=str(plan.cache_dir),
                      ddp_workers=resources.ddp_workers, ddp_use_gpu=resources.gpus_per_trial > 0,
                      ddp_cpus_per_worker=float(resources.cpus_per_process), shared_files=prepared.shared,
                      driver_host=socket.gethostname(), cpus=int(resources.cpus_per_process),
                      busy_wait_s=opts.busy_wait_seconds if opts.busy == "wait" else None,
                      baseline_trial=None if meta.baseline is None else int(meta.baseline.get("trial", 0)))


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


def write_meta(plan: SearchPlan, cluster: ClusterInfo, resources: Resources,
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


def machine_record(plan: SearchPlan, meta: StudyMeta, machine: Any) -> StudyMeta:
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


def only_distinct(plan: SearchPlan, meta: StudyMeta, space: Space, context: dict[str, Any], loaders: Any,
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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
