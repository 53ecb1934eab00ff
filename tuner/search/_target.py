"""A study's target quality (issue 34): from --target or the space's `target:`, on the workload's quality metric,
with the samples between evaluations every trial shares; study.json's on --resume."""

from __future__ import annotations

from typing import Any

from tuner.config import EVAL_EVERY_STEPS, Target
from tuner.errors import ConfigError, StudyError
from tuner.study import Objective


def study_target(plan: Any, cfg: Any, quality: Objective | None) -> Target | None:
    """The study's target: --target, else the space's `target:` (else none), on the workload's quality metric in
    its direction, evaluated every --eval-every-samples samples, else 25 optimizer steps of the baseline's
    effective batch (tuner.config.EVAL_EVERY_STEPS), the same K for every trial. On --resume, study.json's; a
    different one given again is refused."""
    import math

    opts = plan.options
    saved = getattr(plan.meta, "target", None) if plan.meta is not None else None
    if plan.resume:
        old = Target.model_validate(saved) if saved else None
        for option, given, kept in (("--target", opts.target, old.value if old else None),
                                    ("--eval-every-samples", opts.eval_every_samples,
                                     old.eval_every_samples if old else None)):
            if given is not None and given != kept:
                was = f"{option} {kept:g}" if kept is not None else f"no {option}"
                raise StudyError(f"study '{plan.study}' was started with {was}; resume without {option} (or start a "
                                 f"new study with --study NEW_NAME)")
        return old
    value, source = (opts.target, "--target") if opts.target is not None else (plan.space.target, "space")
    if value is None:
        if opts.eval_every_samples is not None:
            raise ConfigError("--eval-every-samples needs a target: give --target VALUE (or target: in the space)")
        return None
    if not math.isfinite(value):
        raise ConfigError(f"--target must be a finite number (got {value:g})")
    if quality is None or not plan.quality_settings().enabled:
        raise ConfigError(f"{source}: a target needs a quality to reach: workload {plan.workload.text} declares no "
                          f"quality metric, or the space has trial.quality.enabled: false")
    every = opts.eval_every_samples
    if every is not None and every < 1:
        raise ConfigError(f"--eval-every-samples must be >= 1 (got {every})")
    return Target(metric=quality.metric, direction=quality.direction or "minimize", value=value,
                  eval_every_samples=every or cfg.params.effective_batch * EVAL_EVERY_STEPS, source=source)
