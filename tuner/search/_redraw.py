"""A config a trial already ran is drawn anew, not run again.

TPE on a small discrete space proposes a config it has already seen (a new user's four-trial `--space loader`
study spent its third trial on its first one's config). A second run of one config adds no new point to the
front, and the confirmation re-runs the pick anyway. So a draw that repeats a trial of the study (finished or
running, this run's or a resumed one's) is told to Optuna as FAIL, which the samplers leave out of their models,
and the sampler is asked again, up to REDRAWS times; the trial number it took is skipped. A space with no other
config left (every draw a repeat) runs the repeat after that, as before, and the search draws no more anew. A
study of more trials than its space has configs (tuner.space.config_count; a rung scheduler's, a small space's)
redraws nothing: it must repeat configs anyway, and failed draws would only make holes in its trial numbers. One of
exactly as many trials as configs redraws: it can run each config once (a `--space loader` study whose probes left
threads alone, two configs and two trials, ran the baseline's twice).

The comparison is on what the trial runs: the sampler's params and the constants the probes add (the loader
chosen for its batch size; the enqueued baseline keeps its own), so the baseline's learned knobs with the probes'
loader is a new config, not the baseline's; and with every knob spelled out (effective), so the baseline's learned
knobs with a loader the probes chose as the defaults (which their plan leaves out, where the baseline names them)
is the baseline's config: a new user's two-trial study ran it twice and spent 131 of its 232 s confirming it
against itself.
"""

from __future__ import annotations

from typing import Any

REDRAWS = 10  # draws of a repeated config before it runs anyway (the space may hold no other)
REPEAT_ATTR = "repeat_of"  # the Optuna user attr of a draw failed as a repeat: the trial whose config it drew


def redraws_for(space: Any, context: dict[str, Any], loaders: Any, trials: int) -> int:
    """How many times a study draws anew a config a trial already ran: REDRAWS, or none where the space holds
    fewer distinct configs than the study's `trials` (repeats are bound to come)."""
    from tuner.space import config_count

    size = config_count(space, context, loaders.knobs if loaders is not None else ())
    return REDRAWS if size is None or size >= trials else 0


def constants(loaders: Any, params: dict[str, Any], enqueued: dict[str, Any]) -> dict[str, Any]:
    """The knobs a trial runs with as constants beside the sampler's `params`: none without a probe plan
    (tuner.study.ProbePlan); an enqueued trial (the baseline: tuner's defaults) keeps its own loader knobs; the
    others get the loader the probes chose for their batch size."""
    if loaders is None:
        return {}
    if any(k in enqueued for k in loaders.knobs):
        return {k: enqueued[k] for k in loaders.knobs if k in enqueued}
    return loaders.loader_for(params.get("batch_size"))


def twin_of(study: Any, trial: Any, loaders: Any) -> int | None:
    """The number of an earlier trial of `study` (complete, pruned or running) that runs the same config as the
    Optuna `trial` just drawn, or None."""
    from optuna.trial import TrialState

    def config(t: Any, enqueued: dict[str, Any]) -> dict[str, Any]:
        return effective({**t.params, **constants(loaders, t.params, enqueued)})

    mine = config(trial, enqueued_params(trial))
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)):
        if t.number != trial.number and config(t, dict(t.system_attrs.get("fixed_params") or {})) == mine:
            return t.number
    return None


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """What `config` runs with, every knob spelled out (tuner.config.Params' defaults filled in): `num_workers 0`
    and no num_workers are one config. A config Params refuses is compared as it is given."""
    from tuner.config import Params

    try:
        return Params.model_validate(config).model_dump()
    except ValueError:
        return dict(config)


def enqueued_params(trial: Any) -> dict[str, Any]:
    """The params a trial was enqueued with: Optuna keeps them in its system attrs (a FrozenTrial shows them; a
    live Trial no longer does in Optuna 5, so through its storage, by the trial's id)."""
    if hasattr(trial, "system_attrs"):
        return dict(trial.system_attrs.get("fixed_params") or {})
    try:
        return dict(trial.storage.get_trial_system_attrs(trial._trial_id).get("fixed_params") or {})
    except (AttributeError, KeyError, TypeError):
        return {}


def redraw_note(redrawn: list[int], repeated: list[int]) -> str | None:
    """The summary's line on the draws a study skipped or ran again; None when there were none."""
    parts = []
    if redrawn:
        n = len(redrawn)
        parts.append(f"the sampler drew a config a trial had already run {n} time{'s' if n != 1 else ''}; each "
                     f"was drawn anew, not run again (Optuna trial{'s' if n != 1 else ''} "
                     f"{', '.join(map(str, redrawn))} failed as repeats, so those numbers have no trial)")
    if repeated:
        parts.append(f"from trial {repeated[0]} on, configs already run ran again: {REDRAWS} draws in a row found "
                     f"no other (the space may hold no config not yet run)")
    return "; ".join(parts) or None
