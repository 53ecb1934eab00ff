"""The study's objectives: the space's, or --objective's over them, `quality` standing for the workload's own;
and the check that a quality objective can be scored (quality scoring on, Inception weights on disk).

Read by plan_search (tuner.search._plan) for a new or resumed study and by check_plan (tuner.search._check), once
the workload has said what its quality is.
"""

from __future__ import annotations

from tuner.config import Quality
from tuner.errors import ConfigError
from tuner.space import Space
from tuner.search._options import SearchPlan
from tuner.study import BY_KEY, METRICS, QUALITY, Objective, StudyMeta


def check_quality(space: Space, objectives: list[Objective]) -> None:
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
