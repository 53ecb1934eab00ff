"""A study's target quality (issue 34), as planned: from --target or the space's `target:`, on the workload's quality
metric, with the samples between evaluations every trial shares; study.json's on --resume. `--target baseline` (or
`target: baseline`) derives it before the first trial (derive_study_target): the baseline's settings train a third
of the study's budget with the same evaluations, a few seeds of it, and the median of the qualities they settle at
is the target (derive_seeds_target).
What needs no measurement (a finite value, K >= 1, ...) plan_search checks (plan_target, check_resumed_target)
before the pre-flight builds anything; study_target makes the Target once the pre-flight knows quality and pace.
The plan is read by its fields (tuner.search's SearchPlan, above this package); the baseline's reference run is
tuner.search's (it trains, above tuner.train) and comes in as `run`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.config import Target
from tuner.errors import ConfigError, StudyError
from tuner.study import Objective
from tuner.target._baseline import (SMOOTH_EVALS, TARGET_SEEDS, default_eval_every, derive_seeds_target,
                                    flat_reference, reference_budget, seed_spread)
from tuner.target._curve import curve_points

BASELINE = "baseline"  # --target baseline / target: baseline: the target the baseline's own training reaches
TARGET_OBJECTIVES = ("time_to_target", "samples_to_target")  # study objectives that need a target (minimized)


@dataclass(frozen=True)
class TargetAsk:
    """The target a new study asks for, checked by plan_search before the pre-flight builds anything (bad input
    changes nothing on disk, not even the reports folder's .cache): `value` None with source 'baseline' is derived
    from the baseline's training; study_target makes the Target once the pre-flight knows the quality and pace."""

    value: float | None
    source: str  # '--target', 'space' or 'baseline'


def plan_target(plan: Any) -> TargetAsk | None:
    """The checks of a new study's target that need no measurement, run by plan_search: --target, else the space's
    `target:` (else none), finite or 'baseline' (with the baseline trial on), quality scoring on, K >= 1, and target
    objectives that have a target and are minimized. None: the study has no target."""
    import math

    opts = plan.options
    value, source = (opts.target, "--target") if opts.target is not None else (plan.space.target, "space")
    if value == BASELINE:
        if not plan.space.defaults.baseline:
            raise ConfigError(f"{source} baseline needs the study's baseline trial, which {plan.space.source} turns "
                              f"off (defaults: baseline: false); give a target VALUE instead")
        value, source = None, "baseline"
    elif isinstance(value, str):
        raise ConfigError(f"{source}: the target is a number on the workload's quality metric, or 'baseline' (got "
                          f"{value!r})")
    seeds = getattr(opts, "target_seeds", None)
    if seeds is not None and source != "baseline":
        raise ConfigError("--target-seeds sets the seeds a target is read from in the baseline's reference run: give "
                          "--target baseline too (a given --target VALUE needs none)")
    if seeds is not None and seeds < 1:
        raise ConfigError(f"--target-seeds must be >= 1 (got {seeds})")
    if value is None and source != "baseline":
        check_target_objectives(plan)
        if opts.eval_every_samples is not None:
            raise ConfigError("--eval-every-samples needs a target: give --target VALUE (or target: in the space)")
        return None
    if value is not None and not math.isfinite(value):
        raise ConfigError(f"{'--target' if source == '--target' else 'the space: target:'} must be a finite number "
                          f"(got {value:g})")
    if not plan.quality_settings().enabled:
        raise _no_quality(plan, source, space_off=True)
    every = opts.eval_every_samples
    if every is not None and every < 1:
        raise ConfigError(f"--eval-every-samples must be >= 1 (got {every})")
    check_target_objectives(plan, given=True)
    return TargetAsk(value=value, source=source)


def check_resumed_target(opts: Any, meta: Any, study: str) -> None:
    """On --resume, run by plan_search: the study keeps study.json's target, K and the seeds a derived target was
    read from; a different one given again is refused."""
    saved = getattr(meta, "target", None)
    old = Target.model_validate(saved) if saved else None
    kept_value = BASELINE if old is not None and old.source == "baseline" else old.value if old else None
    kept_seeds = (len(old.reference_seeds) if old.reference_seeds else 1) \
        if old is not None and old.source == "baseline" and old.value is not None else None
    for option, given, kept in (("--target", opts.target, kept_value),
                                ("--eval-every-samples", opts.eval_every_samples,
                                 old.eval_every_samples if old else None),
                                ("--target-seeds", getattr(opts, "target_seeds", None), kept_seeds)):
        if given is not None and given != kept:
            was = f"{option} {kept:g}" if isinstance(kept, (int, float)) else f"{option} {kept}" \
                if kept is not None else f"no {option}"
            raise StudyError(f"study '{study}' was started with {was}; resume without {option} (or start a "
                             f"new study with --study NEW_NAME)")


def _no_quality(plan: Any, source: str, space_off: bool = False) -> ConfigError:
    """The one line for a target without a quality, naming which is missing: the space turned quality off (`--space
    loader` does: it searches speed alone), or the workload declares no metric."""
    if space_off:
        space = getattr(getattr(plan, "space", None), "source", None) or "the space"
        return ConfigError(f"{source}: a target needs a quality to reach, and {space} turns quality off "
                           f"(trial.quality.enabled: false): use a space that scores quality (--space amp_loader), "
                           f"or no --target")
    return ConfigError(f"{source}: a target needs a quality to reach: workload {plan.workload.text} declares no "
                       f"quality metric (Workload(quality=(metric, 'min' or 'max')))")


def study_target(plan: Any, cfg: Any, quality: Objective | None, budget: Any = None,
                 pace: tuple[float, float] | None = None, subset: int | None = None) -> Target | None:
    """The study's target, from what plan_search checked (plan.target_ask: plan_target): on the workload's quality
    metric in its direction, evaluated every --eval-every-samples samples, else every K samples from the
    pre-flight's `pace` (the baseline's samples/s on the trials' device and its scoring seconds) and the trials'
    `budget` (default_eval_every; 25 optimizer steps of the baseline without a pace), the same K for
    every trial. On --resume, study.json's (check_resumed_target refused a different one). `subset`: the
    validation samples the workload's evaluations score while training (its target_eval_samples; None: all),
    which a derived target records (eval_subset) and a resume must match (check_resumed_subset)."""
    if plan.resume:
        saved = getattr(plan.meta, "target", None) if plan.meta is not None else None
        target = Target.model_validate(saved) if saved else None
        if target is not None and target.source == "baseline" and target.value is None:
            return target.model_copy(update={"eval_subset": subset})  # not set yet: it is derived on this run's
        if target is not None:
            check_resumed_subset(target, subset, plan.study)
        return target
    ask = plan.target_ask
    if ask is None:
        return None
    if quality is None:  # the workload's own: known once the pre-flight built it
        raise _no_quality(plan, ask.source)
    every = plan.options.eval_every_samples
    if every is None:
        every = default_eval_every(cfg.params.effective_batch, budget or plan.budget, *(pace or (None, None)))
    return Target(metric=quality.metric, direction=quality.direction or "minimize", value=ask.value,
                  eval_every_samples=every, source=ask.source,
                  **({"eval_subset": subset} if ask.source == BASELINE else {}))


def check_resumed_subset(target: Target, subset: int | None, study: str) -> None:
    """A derived target is a quality on what its evaluations scored: 128 validation samples read a loss or an FID
    that the whole split does not, so trials that evaluate another subset than the baseline did would be timed to
    a target of another scale. A resume under a workload whose target_eval_samples changed since (an edited file, a
    workload option, a tuner whose built-ins changed) is refused, one line; a record that predates eval_subset
    says nothing and is not checked."""
    if target.source != BASELINE or "eval_subset" not in target.model_fields_set or target.eval_subset == subset:
        return

    def scored(n: int | None) -> str:
        return "the whole validation split" if n is None else f"{n} validation samples"

    raise StudyError(f"study '{study}' derived its target {target.describe()} from evaluations of "
                     f"{scored(target.eval_subset)}, and the workload now scores {scored(subset)} while training "
                     f"(target_eval_samples): resume with the workload as it was (target_eval_samples="
                     f"{target.eval_subset if target.eval_subset is not None else 'None'}), or start a new study "
                     f"with --study NEW_NAME")


MIN_TARGET_EVALS = 5  # a derived target is read from at least this many evaluations of the reference run
MAX_EVAL_SHARE = 0.5  # K is lowered to hold them only while an evaluation costs at most this share of the
# training between two; past it the study stops before it starts (an evaluation that costs more than the run)


def check_target_evaluations(target: Target | None, budget: Any, samples_per_s: float | None,
                             score_s: float | None, given_k: bool, effective_batch: int) -> tuple[Target | None,
                                                                                                  str | None]:
    """Never a study whose objective cannot be read (issue 51): a derived target is the mean of the baseline's last
    evaluations in its reference run (a third of the budget), and a K that leaves it fewer than MIN_TARGET_EVALS
    of them read the target from one or none (a nanoGPT study at 30 s held 0 and ran 8 trials that ranked nothing).
    The default K is lowered to hold MIN_TARGET_EVALS while an evaluation costs at most MAX_EVAL_SHARE of the
    training between two (said in the note returned); otherwise, or with the user's K, the study stops here, before
    anything is written, with one line naming what to change. Returns the target the trials get and the note."""
    import math

    if target is None or target.source != "baseline" or not samples_per_s:
        return target, None
    ref = reference_budget(budget)
    samples = ref.samples if ref.samples is not None else (ref.seconds or 0.0) * samples_per_s
    k = target.eval_every_samples
    n = int(samples // k)
    if n >= MIN_TARGET_EVALS:
        return target, None
    held = (f"the baseline's reference run (a third of the budget, {ref.describe()}, about {samples:,.0f} samples at "
            f"the pre-flight's pace) holds about {n} evaluation{'s' if n != 1 else ''} at K = {k:,} samples, fewer "
            f"than the {MIN_TARGET_EVALS} a target is read from")
    eval_s = score_s or 0.0
    # the finest K whose evaluation costs at most MAX_EVAL_SHARE of the training between two, and the budget that
    # holds MIN_TARGET_EVALS of them in its reference run (a third of it)
    k_min = max(effective_batch, eval_s * samples_per_s / MAX_EVAL_SHARE)
    needed = 3 * MIN_TARGET_EVALS * k_min
    longer = (f"a longer budget (--budget-seconds {math.ceil(needed / samples_per_s):g} or more)"
              if budget.seconds is not None else f"a longer budget (--budget-samples {math.ceil(needed):,} or more)")
    if given_k:
        finest = int(samples // MIN_TARGET_EVALS)
        raise ConfigError(f"{held}: give --eval-every-samples {finest:,} or less, {longer}, or --target VALUE")
    adapted = effective_batch * int(samples // MIN_TARGET_EVALS // effective_batch)
    if adapted < 1 or adapted < k_min - 1e-9:
        cost = f"one evaluation takes about {eval_s:.2g} s, " if eval_s else ""
        raise ConfigError(f"{held}, and {cost}more than {MAX_EVAL_SHARE:.0%} of the training between two at a K "
                          f"that holds them: give {longer}, a cheaper evaluation (Workload(target_eval_samples=N) "
                          f"scores a fixed subset of the validation split while training), or --target VALUE")
    share = eval_s * samples_per_s / adapted
    return (target.model_copy(update={"eval_every_samples": adapted}),
            f"K lowered from {k:,} to {adapted:,} samples so the baseline's reference run holds {MIN_TARGET_EVALS} "
            f"evaluations to read the target from; each evaluation costs about {share:.0%} of the training between "
            f"two (give --eval-every-samples, a cheaper evaluation or --target VALUE to choose otherwise)")


def check_target_objectives(plan: Any, given: bool = False) -> None:
    """`objectives: [time_to_target]` (or samples_to_target) needs the study's target, and is minimized: a trial
    that never reaches the target has no value and is told to Optuna as a failed trial is (penalties, a violated
    constraint: tuner.search._outcome), so the sampler learns to leave configs that train worse."""
    for o in getattr(plan, "objectives", None) or []:
        if o.metric not in TARGET_OBJECTIVES:
            continue
        cli = bool(getattr(getattr(plan, "options", None), "objectives", None))
        where = "--objective" if cli else f"{plan.space.source or 'the space'}: objectives:"
        if not given:
            raise ConfigError(f"{where} {o.metric} needs a target: give --target VALUE (or --target "
                              f"baseline), or target: in the space")
        if o.direction == "maximize":
            raise ConfigError(f"{where} {o.metric} is minimized (sooner is better); give it direction "
                              f"min or leave the direction out")


def derive_study_target(plan: Any, space: Any, context: dict[str, Any], base: dict[str, Any], console: Any,
                        run: Callable[[str, str, float | None], dict[str, Any]]) -> Any:
    """Set a `baseline` target before the first trial, and before the study's folder holds anything (the runner
    writes study.json with it): the baseline's settings (the space's baseline point, the workload's own lr and
    betas) train a reference budget, a third of the study's (reference_budget), evaluating every K samples as the
    trials will, once per seed (--target-seeds, TARGET_SEEDS by default: the baseline's own seed and the next
    ones), and the target is the median of what the seeds settle at (derive_seeds_target: from one seed it moved
    10-20% with the seed). The cost is said first. `run` trains one seed on a trial's resources (tuner.search's
    reference run: the config as JSON, the cache folder, the scoring reserve -> its state, error and quality
    curve). study.json keeps the target, with each seed's reading, the evaluations it came from and the reference
    budget, so --resume never derives it again (a study killed before it was set derives it then). A baseline
    whose seeds read no evaluation stops the study here, one line and exit 2, with nothing left that blocks the
    name (issue 51: its trials ran without a target, 8 of them ranking nothing). Returns the plan with the target
    the trials get (unchanged when nothing was to derive)."""
    from dataclasses import replace

    from tuner.config import Budget, dump_config

    pending = plan.target
    if pending is None or pending.value is not None:
        return plan
    reference = reference_budget(plan.budget)
    n = getattr(plan.options, "target_seeds", None) or TARGET_SEEDS
    cfg = space.trial_config(space.baseline_point(context, own=plan.own), base, source="the baseline's target run")
    cfg = cfg.model_copy(update={"budget": reference})
    seeds = [cfg.params.seed + i for i in range(n)]
    if console is not None:
        total = Budget(samples=n * reference.samples) if reference.samples is not None \
            else Budget(seconds=n * (reference.seconds or 0.0))
        each = f"{n} seeds of {reference.describe()} each ({total.describe()} of training in all, plus each seed's " \
               f"setup)" if n > 1 else f"{reference.describe()}"
        console.print(f"deriving the target from the baseline: its settings train {each}, a third of the trials' "
                      f"{plan.budget.describe()}, evaluating {pending.metric} every {pending.eval_every_samples:,} "
                      f"samples ...", soft_wrap=True)
    curves, found, t0 = [], {}, time.perf_counter()
    for seed in seeds:
        one = cfg.model_copy(deep=True)
        one.params.seed = seed
        found = run(json.dumps(dump_config(one)), str(plan.cache_dir), plan.preflight.score_seconds)
        curves.append((seed, curve_points(found["curve"])))
    derived = derive_seeds_target(curves, pending)
    if derived is None:
        why = found["error"] or f"{len(found['curve'])} evaluation{'s' if len(found['curve']) != 1 else ''} " \
                                f"at K = {pending.eval_every_samples:,} samples, none finite"
        runs = f"{n} seeds of " if n > 1 else ""
        raise ConfigError(f"the baseline's reference run ({runs}{reference.describe()}) read no {pending.metric} "
                          f"({found['state']}: {why}), so no target can be set and no trial's time to target "
                          f"read: give --target VALUE, a longer budget, a smaller --eval-every-samples, or a "
                          f"cheaper evaluation")
    derived = derived.model_copy(update={"reference_budget": reference,
                                         "reference_seconds": round(time.perf_counter() - t0, 1)})
    flat = flat_reference(curves, derived)
    if console is not None:
        console.print(f"target: {derived.describe()} ({derived_how(derived)})", soft_wrap=True)
        if flat:
            from rich.markup import escape

            console.print(f"[yellow]note:[/yellow] {escape(flat)}", soft_wrap=True)
    return replace(plan, target=derived, target_note=flat)


def derived_how(target: Target) -> str:
    """How a derived target was read, as the study says it: `the median of 3 seeds of the baseline, each the mean
    of its last 3 evaluations after 5 s of training; the 3 seeds read 1.52-1.71, 12% of the target apart` (one
    seed, as before issue 51: `the mean of its last 3 evaluations after ...`)."""
    seeds = target.reference_seeds or []
    after = f" after {target.reference_budget.describe()} of training" if target.reference_budget else ""
    if len(seeds) < 2:
        return f"set by the baseline: the mean of its last {len(target.evaluations or [])} evaluations{after}"
    spread = seed_spread(target)
    return (f"set by the baseline: the median of {len(seeds)} seeds, each the mean of its last {SMOOTH_EVALS} "
            f"evaluations{after}"
            + (f"; {spread}" if spread else ""))
