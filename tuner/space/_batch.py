"""The effective batch in a space (issue 40): kept fixed unless the space asks to change it, and split.

A space that searches `batch_size` searches how one effective batch (batch_size x accumulation_steps, per training
process) is split: the micro-batch `batch_size` is drawn among the divisors of the effective batch that its own
domain allows, and `accumulation_steps` follows (effective / micro-batch, within its domain where the space gives
one; a space that fixes accumulation_steps fixes the split: micro-batch = effective / accumulation_steps). Without
batch-statistics layers (tuner.measure.batch_stats) every split computes the same gradient, so the
split is a speed knob; with them it changes what is learned.

Which effective batch: the workload's own, i.e. the baseline's (the space's fixed batch_size / accumulation_steps,
else tuner's defaults: 64 x 1), unless the space has a top-level `effective_batch:` (a fixed value, `{type: int,
low, high, log}` or `{type: categorical, choices}`): an explicit choice, drawn first (as `_effective_batch`), then
split: a micro-batch drawn from batch_size's domain (as `_micro_batch`) is stepped to the nearest divisor. A leading
underscore keeps those two out of the trial's params; its batch_size x accumulation_steps is what ran.
A space searching accumulation_steps with a fixed batch_size (no split possible) keeps its old meaning: the
effective batch changes with accumulation_steps, and the note says so.
"""

from __future__ import annotations

import math
from typing import Any

from tuner.errors import ConfigError
from tuner.knobs import heavy_knobs

# Spaces (tuner.space._space, which calls this module) and their ParamSpecs are typed Any here: no import circle.
Space = ParamSpec = Any

EFFECTIVE = "_effective_batch"  # the sampler's names for an explicit effective batch and the micro-batch drawn
MICRO = "_micro_batch"  # for it (before it is stepped to a divisor); a leading _ keeps them out of trial params
_MAX_ACCUMULATION = 1024  # tuner.config.Params.accumulation_steps's limit
BATCH, ACCUMULATION = heavy_knobs()  # tuner.knobs: the effective batch's factors, batch_size x accumulation_steps
_SCAN = 512  # an int effective_batch range is checked for a possible split over at most this many values


def own_batch(space: Space) -> tuple[int, int]:
    """The baseline's batch_size and accumulation_steps: the space's fixed ones (its `params:` or `trial.params`,
    where a study puts the workload's own batch: Space.with_own_batch), else tuner's defaults."""
    from tuner.config import Params

    fixed = {**dict(space.trial.get("params") or {}), **space.fixed_values()}
    defaults = Params()
    return (int(fixed.get("batch_size", defaults.batch_size)),
            int(fixed.get("accumulation_steps", defaults.accumulation_steps)))


def own_effective_batch(space: Space) -> int:
    """The baseline's effective batch per process (own_batch's product)."""
    batch, accumulation = own_batch(space)
    return batch * accumulation


def splits(space: Space) -> bool:
    """Whether this space searches the split of an effective batch (it searches batch_size)."""
    spec = space.params.get("batch_size")
    return spec is not None and not spec.fixed


def _allows(spec: ParamSpec | None, value: int, *, default_high: int) -> bool:
    if spec is None or spec.fixed and spec.value is None:
        return 1 <= value <= default_high
    if spec.fixed:
        return value == spec.value
    if spec.type == "categorical":
        return any(value == c for c in spec.choices or [])
    if spec.has_expressions:
        return 1 <= value <= default_high
    return spec.low <= value <= spec.high  # type: ignore[operator]


def micro_batches(space: Space, effective: int) -> list[int]:
    """The micro-batch sizes that split `effective` exactly within the domains of batch_size and accumulation_steps,
    smallest first: one at most where the space fixes accumulation_steps (micro-batch = effective / accumulation)."""
    acc = space.params.get("accumulation_steps")
    divisors = sorted({d for i in range(1, math.isqrt(effective) + 1) if effective % i == 0
                       for d in (i, effective // i)})
    return [d for d in divisors
            if _allows(space.params.get("batch_size"), d, default_high=effective)
            and _allows(acc, effective // d, default_high=_MAX_ACCUMULATION)]


def _effective_values(spec: ParamSpec) -> list[int] | None:
    """Every value an explicit effective_batch can take, or None for a range too wide to list."""
    if spec.fixed:
        return [spec.value]
    if spec.type == "categorical":
        return list(spec.choices or [])
    if int(spec.high) - int(spec.low) > _SCAN:  # type: ignore[arg-type]
        return None
    return list(range(int(spec.low), int(spec.high) + 1))  # type: ignore[arg-type]


def check_batch(space: Space, source: str) -> None:
    """At load: an explicit effective_batch is a whole-number domain of positive batches, and the effective batch
    (the workload's own, or each explicit one) can be split within the space's batch_size / accumulation_steps
    domains. Each problem is one ConfigError line naming the key and the fix."""
    spec = space.effective_batch
    key = f"{source}: effective_batch"
    if spec is not None:
        if spec.type in ("float", "bool") or spec.when or spec.native or spec.has_expressions:
            raise ConfigError(f"{key}: give a whole number, {{type: int, low, high}} or {{type: categorical, "
                              f"choices}} of batch sizes (no when, native or resource expressions)")
        if spec.type == "int" and spec.step is not None:
            raise ConfigError(f"{key}: step does not apply; give choices to list the effective batches")
        for v in spec.endpoints():
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 65536 * _MAX_ACCUMULATION:
                raise ConfigError(f"{key}: {v!r} is not an effective batch; give whole numbers from 1 to "
                                  f"{65536 * _MAX_ACCUMULATION} (samples per optimizer step and process)")
        if not splits(space):
            raise ConfigError(f"{key}: searching the effective batch needs batch_size searched (it is split into "
                              f"batch_size x accumulation_steps); add batch_size: {{type: int, low, high, log: true}}")
    if not splits(space):
        return
    values = [own_effective_batch(space)] if spec is None else _effective_values(spec)
    if values is None:
        return
    bad = [v for v in values if not micro_batches(space, int(v))]
    acc = fixed_accumulation(space)
    if acc is not None and bad and all(int(v) % acc for v in bad) and (spec is None or len(bad) == len(values) or
                                                                       spec.fixed or spec.type == "categorical"):
        what = f"{key} {bad[0]}" if spec is not None else f"{source}: the workload's effective batch {bad[0]}"
        raise ConfigError(f"{what} is not a multiple of the fixed accumulation_steps {acc} (batch_size = effective "
                          f"batch / accumulation_steps); give an effective batch that {acc} divides, or change "
                          f"accumulation_steps")
    if spec is None and bad:
        raise ConfigError(f"{source}: params.batch_size: no micro-batch in its domain splits the workload's effective "
                          f"batch {bad[0]} (batch_size x accumulation_steps of the baseline) within accumulation_steps'"
                          f" domain; widen batch_size's domain to a divisor of {bad[0]}, or add effective_batch: "
                          f"{{type: int, low, high}} to change the effective batch")
    if spec is not None and (len(bad) == len(values) or (bad and (spec.fixed or spec.type == "categorical"))):
        raise ConfigError(f"{key}: {bad[0]} cannot be split into a batch_size x accumulation_steps of their domains; "
                          f"change effective_batch, or widen batch_size's domain to include a divisor of {bad[0]}")


def fixed_accumulation(space: Space) -> int | None:
    """accumulation_steps where the space fixes it to one value (the split's micro-batch then follows from it)."""
    spec = space.params.get("accumulation_steps")
    return int(spec.value) if spec is not None and spec.fixed and spec.value is not None else None


def batch_note(space: Space) -> str | None:
    """One line on what the space does with the effective batch, where that is not obvious: the split (the meaning
    of batch_size for a space written before issue 40), the explicit effective batch, or accumulation alone."""
    if space.effective_batch is not None and splits(space):
        return (f"effective batch: searched explicitly ({space.effective_batch.describe()}), each split into "
                f"batch_size x accumulation_steps")
    if splits(space):
        e = own_effective_batch(space)
        shown = ", ".join(str(m) for m in micro_batches(space, e))
        return (f"effective batch kept at the workload's own {e}: batch_size is its micro-batch ({shown}) and "
                f"accumulation_steps = {e} / batch_size; add effective_batch: {{type: int, low, high}} to the space "
                f"to change the effective batch")
    acc = space.params.get("accumulation_steps")
    if acc is not None and not acc.fixed:
        return ("accumulation_steps searched with a fixed batch_size: the effective batch changes with it (batch_size "
                "x accumulation_steps)")
    return None


def _nearest(values: list[int], want: float) -> int:
    return min(values, key=lambda v: (abs(math.log(v) - math.log(max(want, 1e-9))), v))


def sample_split(space: Space, trial: Any) -> dict[str, int]:
    """Draw the effective batch (explicit) and its split: {batch_size, accumulation_steps}, whose product is the
    workload's own effective batch, or the explicit one drawn (stepped to the nearest one that splits)."""
    spec = space.effective_batch
    if spec is None:
        effective = own_effective_batch(space)
        micro = int(trial.suggest_categorical("batch_size", micro_batches(space, effective)))
        return {BATCH: micro, ACCUMULATION: _follows(trial, ACCUMULATION, effective // micro)}
    effective = int(spec.suggest(trial, EFFECTIVE))
    if not micro_batches(space, effective):
        values = _effective_values(spec)
        if values is None:  # a wide range: the nearest value above, then below, that splits
            low, high = int(spec.low), int(spec.high)  # type: ignore[arg-type]
            values = [v for d in range(1, _SCAN) for v in (effective + d, effective - d) if low <= v <= high]
        effective = min((v for v in values if micro_batches(space, int(v))),
                        key=lambda v: abs(v - effective), default=effective)
    drawn = space.params["batch_size"].suggest(trial, MICRO)
    micro = _nearest(micro_batches(space, effective), float(drawn))
    return {BATCH: _follows(trial, BATCH, micro), ACCUMULATION: _follows(trial, ACCUMULATION, effective // micro)}


def _follows(trial: Any, name: str, value: int) -> int:
    """A value that follows from the draws, recorded on the trial as a one-point int (Optuna models nothing for it;
    Ray's define-by-run search puts it in the trial's config like a draw)."""
    return int(trial.suggest_int(name, value, value))


def baseline_split(space: Space, batch_size: int) -> dict[str, Any]:
    """The baseline's split: its own batch_size and effective batch, where the space allows them (else empty: the
    sampler draws)."""
    spec = space.effective_batch
    effective = int(spec.value) if spec is not None and spec.fixed else own_effective_batch(space)
    if batch_size not in micro_batches(space, effective):
        return {}
    point: dict[str, Any] = {BATCH: batch_size, ACCUMULATION: effective // batch_size}
    if space.effective_batch is not None:
        if not space.effective_batch.fixed and not space.effective_batch.contains(effective):
            return {}
        if not space.effective_batch.fixed:
            point[EFFECTIVE] = effective
        if space.params["batch_size"].contains(batch_size):
            point[MICRO] = batch_size
    return point


def split_learning_note(space: Space, layers: list[str]) -> str | None:
    """The line a study starts with where its split of the effective batch changes what is learned: the space splits
    and the workload's models have batch-statistics layers (tuner.measure.batch_stats); None otherwise."""
    from tuner.measure.batch_stats import split_note

    return split_note(layers) if splits(space) else None


def heaviest_split(space: Space) -> dict[str, int] | None:
    """The heaviest step a splitting space's trials run: the largest effective batch it allows (the workload's own
    where it keeps it) in its largest micro-batch (what the pre-flight times beside the baseline's step, so a study
    says when its slowest trials do not fit the budget); None where the space does not split, or no split fits."""
    if not splits(space):
        return None
    spec = space.effective_batch
    if spec is None:
        top = own_effective_batch(space)
    elif spec.fixed:
        top = int(spec.value)
    elif spec.type == "categorical":
        top = int(max(spec.choices or [0]))
    else:
        top = int(spec.high)  # type: ignore[arg-type]
    micros = micro_batches(space, top) if top > 0 else []
    if not micros:
        return None
    return {BATCH: micros[-1], ACCUMULATION: top // micros[-1]}


def kept_split(space: Space) -> list[int] | None:
    """The micro-batches a space that keeps the workload's effective batch draws from (what the loader probes need
    to cover); None where the space does not split or changes the effective batch."""
    if not splits(space) or space.effective_batch is not None:
        return None
    return micro_batches(space, own_effective_batch(space))


def split_distributions(space: Space) -> dict[str, Any]:
    """The Optuna distributions sample_split gives batch_size and accumulation_steps in a space that splits (a
    resumed study's trials must have drawn them alike: Optuna keeps one distribution per name for a study's life).
    `space` resolved (a study's stored domains)."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if not splits(space):
        return {}
    follows = IntDistribution(1, 1)  # _follows: a one-point int, whatever its value
    if space.effective_batch is not None:
        return {BATCH: follows, ACCUMULATION: follows}
    return {BATCH: CategoricalDistribution(micro_batches(space, own_effective_batch(space))), ACCUMULATION: follows}

