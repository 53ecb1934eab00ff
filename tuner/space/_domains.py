"""The stored domains of a study: a study's domains are fixed for its life (Optuna needs one distribution per param).

The first run stores the resolved domains and the sampling context in study.json (`domains`, `context`), and
`--resume` reuses them even on other hardware, with a warning saying what this machine would have chosen instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.space._param import ParamSpec
from tuner.space._space import Space


@dataclass(frozen=True)
class StudySpace:
    """The space a study samples from, the context its conditions see, and what to tell the user: notes are
    information (what the study does with the effective batch), warnings are what to look at (a resume that keeps
    domains other than this machine's)."""

    space: Space
    context: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def stored_space(space: Space, domains: dict[str, Any]) -> Space:
    """`space` with the domains a study stored when it started (study.json `domains`)."""
    params = {name: ParamSpec.model_validate(domains[name]) if name in domains else spec
              for name, spec in space.params.items()}
    return space.model_copy(update={"params": params})


def study_space(space: Space, context: dict[str, Any], meta: Any = None) -> StudySpace:
    """The space a study samples from and the context its conditions see, plus notes and warnings.

    A new study (or one stored before domains were recorded): `space` resolved for `context` (a ConfigError when
    a domain comes out empty). A resumed study: the domains and context stored by its first run, whatever this
    machine would resolve, with a warning where they differ."""
    from tuner.space._batch import batch_note

    domains = getattr(meta, "domains", None)
    batch = [note] if (note := batch_note(space)) is not None else []  # what the study does with the effective batch
    if not domains:
        return StudySpace(space.resolve(context), context, notes=batch)
    saved_context = dict(getattr(meta, "context", None) or context)
    kept = stored_space(space, domains)
    notes = []
    fresh = space.resolve(context, strict=False)
    differ = [name for name, spec in fresh.params.items() if spec != kept.params[name]]
    if differ:
        shown = "; ".join(f"{n}: {kept.params[n].describe()} (here: {fresh.params[n].describe()})" for n in differ)
        notes.append(f"resuming with the domains this study started with ({_describe_context(saved_context)}), not "
                     f"this machine's ({_describe_context(context)}): {shown}; throughputs measured on other "
                     f"hardware do not compare")
    return StudySpace(kept, saved_context, notes=batch, warnings=notes)


def _describe_context(ctx: dict[str, Any]) -> str:
    gpus = ctx.get("gpus", 0)
    return f"{ctx.get('cpus')} CPUs" + (f", {gpus} GPU" if gpus else "") + (f" on {ctx['device']}" if
                                                                              ctx.get("device") else "")


def domains_of(space: Space) -> dict[str, Any]:
    """The resolved domains as study.json stores them (only those that depended on the trial)."""
    return {name: spec for name, spec in space.definition()["params"].items()}


def check_stored_domains(space_def: dict[str, Any] | None, domains: dict[str, Any] | None, source: str) -> None:
    """On --resume, before any work: the domains study.json stored are valid ones of the study's own space
    (a StudyError naming `domains.<param>`), since the search samples from them."""
    from tuner.errors import ConfigError, StudyError
    from tuner.space._load import parse_space

    if not domains or not isinstance(space_def, dict):
        return
    fix = "restore the file from the study's backup or start a new study"
    params = space_def.get("params") if isinstance(space_def.get("params"), dict) else {}
    unknown = [name for name in domains if name not in params]
    if unknown:
        raise StudyError(f"{source}: domains.{unknown[0]}: not a param of the study's space ({', '.join(params)}); "
                         f"{fix}")
    try:
        parse_space({**space_def, "params": {**params, **domains}}, source=source, name="stored")
    except ConfigError as err:
        text = str(err).replace(f"{source}: params.", f"{source}: domains.", 1)
        raise StudyError(f"{text}; {fix}") from None


def check_resumable_split(space: Space, domains: dict[str, Any] | None, drawn: dict[str, Any], source: str) -> None:
    """On --resume, before any work: the trials a study ran drew batch_size and accumulation_steps (`drawn`: the
    Optuna distributions stored with them) as this tuner's split of the effective batch draws them; a study begun
    before the space kept the effective batch (an int range of batch_size) is one StudyError line, not Optuna's
    ValueError in every new trial. Without stored domains (an older study) only the kind of draw is compared."""
    from optuna.distributions import check_distribution_compatibility

    from tuner.errors import StudyError
    from tuner.space._batch import split_distributions

    expected = split_distributions(stored_space(space, domains) if domains else space)
    for name, new in expected.items():
        old = drawn.get(name)
        if old is None:
            continue
        try:
            if domains:
                check_distribution_compatibility(old, new)
            elif type(old) is not type(new):
                raise ValueError(name)
        except ValueError:
            raise StudyError(f"{source}: this study drew {name} as {_drawn(old)}, from before the space kept the "
                             f"effective batch, and this tuner draws it as {_drawn(new)}, which its trials cannot "
                             f"continue; start a new study (--study NEW_NAME) with the same space") from None


def _drawn(dist: Any) -> str:
    choices = getattr(dist, "choices", None)
    if choices is not None:
        return "one of " + ", ".join(str(c) for c in choices)
    if dist.low == dist.high:
        return "a value that follows from the split"
    return f"{'a log-scaled ' if getattr(dist, 'log', False) else 'an '}int range [{dist.low}, {dist.high}]"

