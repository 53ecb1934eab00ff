"""check_plan: the plan made the one the trials run, by the pre-flight (tuner.train.check_workload) before Ray.

It builds the workload once, as a trial would, resolves the objectives (`quality` becomes the workload's own), and
on the trials' kind of device times a step and a scoring: a seconds budget the user gave that cannot hold them is
refused, the space's default budget is raised to the one it needs (`_check_budget`), and the space's heaviest step
is timed too, so a study says when its slowest trials do not fit (`_heaviest`). The target and its evaluations are
planned on the pace measured there (tuner.target).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tuner.config import Budget
from tuner.errors import ConfigError
from tuner.knobs import heavy_knobs, hyperparameter_knobs, knob
from tuner.search._allowance import preflight_trial_s
from tuner.schedule import SchedulerPlan, plan_scheduler
from tuner.search._objectives import study_objectives
from tuner.search._options import SearchPlan, trial_base
from tuner.target import check_target_evaluations, study_target
from tuner.study import BY_KEY, Preflight, SizedBudget


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
    at: dict[str, Any] = {"space": plan.space}

    def at_batch(own: int | None) -> tuple[Any, Any]:
        """The baseline's config and the space's heaviest step, at the workload's own batch (Space.with_own_batch):
        called by the pre-flight once it has built the workload, before it times anything."""
        at["space"], at["note"] = plan.space.with_own_batch(own)
        resolved = at["space"].resolve(context, strict=False)
        at["cfg"] = at["space"].trial_config(resolved.baseline_point(context), trial_base(plan, 0, "cpu"),
                                             source=f"study '{plan.study}'")
        return at["cfg"], _heaviest(resolved, at["cfg"]) if trial_device is not None and plan.budget.seconds \
            is not None else None

    cfg, heaviest = at_batch(None)
    check = check_workload(cfg, plan.cache_dir, trial_device or resolve_device("cpu"), heaviest=heaviest,
                           at_batch=at_batch)
    cfg, space = at["cfg"], at["space"]
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
    target = study_target(plan, cfg, check.quality, sized.budget, pace, check.target_eval_samples)  # tuner.target
    few = None
    if not plan.resume and pace is not None:  # a K the reference run cannot read a target from: adapted or refused
        target, few = check_target_evaluations(target, sized.budget, pace[0], pace[1],
                                               plan.options.eval_every_samples is not None, cfg.params.effective_batch)
    space, optimizer_note = _fit_optimizer(plan, space, [n for n in hyperparameter_knobs()
                                                         if n in space.searched and n not in check.own])
    objectives = plan.objectives if plan.resume else study_objectives(space, plan.workload.text, check.quality,
                                                                      plan.options.objectives)
    for o in objectives:
        if o.metric not in BY_KEY and o.metric not in check.metrics:
            raise ConfigError(f"{plan.space.source}: objectives: {o.metric!r} is not a metric tuner measures nor one "
                              f"that workload {plan.workload.text}'s evaluate() returns "
                              f"({', '.join(check.metrics) or 'none'})")
    return replace(plan, space=space, objectives=objectives, budget=sized.budget, scheduler=sized.scheduler,
                   preflight=preflight, sized=sized.sized, heavy_note=sized.heavy_note, own=check.own, target=target,
                   batch_note="; ".join(n for n in (at["note"], split_learning_note(space, check.batch_statistics))
                                        if n) or None,  # issue 40: said at the start
                   eval_note=few, optimizer_note=optimizer_note,
                   preflight_s=preflight_trial_s(sized.budget, check.step_seconds, check.step_samples,
                                                 check.score_seconds))


def _fit_optimizer(plan: SearchPlan, space: Any, lacking: list[str]) -> tuple[Any, str | None]:
    """The space for the workload's own optimizer. A bundled space searches Adam's betas for every workload; its
    user did not choose them, so for an optimizer that takes none (SGD, the usual one for a torchvision classifier)
    they are left out and the study says so as it starts. A user's own space that names them is refused: the file
    and the workload disagree, and only its author knows which one is meant."""
    if not lacking:
        return space, None
    settings = ", ".join(dict.fromkeys(str(knob(n).hyperparameter) for n in lacking))
    kept = space.without(lacking)
    if not plan.space.bundled or not kept.searched:
        raise ConfigError(f"{plan.space.source}: params: searches {', '.join(lacking)}, which workload "
                          f"{plan.workload.text}'s optimizer does not take (no {settings} in its hyperparameters); "
                          f"use a space without them (--space loader, which searches no lr) or a copy of "
                          f"{plan.space.source} without {' and '.join(lacking)}")
    return kept, (f"{', '.join(lacking)} not searched: workload {plan.workload.text}'s optimizer takes no {settings} "
                  f"(none in its hyperparameters); the {space.name} space's other knobs are searched")
