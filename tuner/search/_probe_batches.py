"""The batch sizes a study's probes read (tuner.search._probe runs them), and the choice at each: the loader
(tuner.search._loader_probe) and the compute-side knobs (tuner.search._speed_probe) taken from what one batch
size's probe found, or, where the pre-flight already timed its step too slow for a reading, without setting it up.

The space's largest micro-batch, where the pre-flight (check_plan, before Ray starts) already timed its step too
slow for a reading, with PREFLIGHT_MARGIN to spare, is not set up at all (`not_set_up`): its models, warm-up and
a reading cut at the deadline would only conclude "model not read" (2.4 s of the default study's 10 s of probes,
the GAN at batch 256 on 2 cores), so it gets that conclusion directly, said so in its line, and its input ceiling
is not cached. The baseline's batch is probed whatever the pre-flight timed there (preflight_steps).
"""

from __future__ import annotations

import math
from typing import Any

from tuner.search._loader_probe import choose
from tuner.search._speed_probe import NO_4D_WEIGHTS, choose_speed
from tuner.search._split_probe import MAX_SPLITS
from tuner.space import Space
from tuner.study import LoaderProbe, Preflight, ProbeChoice, SpeedProbe

MAX_BATCHES = 3
# A batch size is not set up at all where the pre-flight's step there is too slow for a reading of this many
# times the deadline: the pre-flight's step is one noisy step (the faster of two), so a step timed a little too
# slow is still probed, and its reading decides.
PREFLIGHT_MARGIN = 1.5


def candidate_batches(space: Space, context: dict[str, Any], *, every_split: bool = False) -> list[int]:
    """A few batch sizes the search will use: the domain's ends and its (geometric) middle, or its choices (of a
    kept effective batch: its split's micro-batches; `every_split`: all of them, up to MAX_SPLITS, where the
    probes decide the split)."""
    from tuner.config import Params
    from tuner.space import kept_split

    spec = space.params.get("batch_size")
    if spec is None or spec.fixed:
        return [int(spec.value) if spec is not None else Params().batch_size]
    split = kept_split(space)  # the micro-batches of a kept effective batch: the only ones its trials run
    if spec.type == "categorical" or split is not None:
        values = split if split is not None else sorted({int(v) for v in spec.choices or []})
        if len(values) <= (MAX_SPLITS if every_split and split is not None else MAX_BATCHES):
            return values
        return [values[0], values[len(values) // 2], values[-1]]
    lo, hi = int(spec.low), int(spec.high)  # type: ignore[arg-type]
    mid = int(round(math.sqrt(lo * hi)))
    return sorted({lo, mid, hi})


def choice_of(batch: int, loaders: list[dict[str, Any]], found: dict[str, Any],
              speeds: list[dict[str, Any]] | None = None) -> ProbeChoice:
    """The loader and speed knobs chosen at one batch size from what probe_batch found there."""
    read = found.get("input_readings") or [[v] for v in found["inputs"]]
    probes = [LoaderProbe(loader=dict(lo), input_ceiling=v, readings=list(r))
              for lo, v, r in zip(loaders, found["inputs"], read)]
    choice = ProbeChoice(batch_size=batch, compute_ceiling=found["compute"], probes=probes,
                          raised=found.get("raised"), reading_seconds=found.get("seconds"))
    speeds = speeds or [{}]
    computes = found.get("computes") or [found["compute"]]
    read = found.get("readings") or [[v] for v in computes]
    choice.speed_probes = [SpeedProbe(knobs=dict(sp), compute_ceiling=v, readings=list(r))
                           for sp, v, r in zip(speeds, computes, read)]
    if any("channels_last" in sp for sp in speeds) and not found.get("image", True):
        choice.notes.append(NO_4D_WEIGHTS)
    choice.speed, choice.compute_ceiling = choose_speed(found["compute"], choice.speed_probes)
    choice.loader = choose(choice.compute_ceiling, probes,
                           on_cpu=not str(found.get("device", "")).startswith("cuda"))
    return choice


def preflight_steps(preflight: Preflight) -> dict[int, float]:
    """The seconds of one micro-batch's step (no accumulation) at the space's largest micro-batch, which the
    pre-flight timed on the trials' device (check_plan: `heaviest`); {} when it timed none (a cluster's trials, a
    resume, a space whose baseline is its heaviest) or when that batch is the baseline's own. The baseline's batch
    is always probed: most trials draw their loader there, and the pre-flight's one step there, taken seconds
    before the probes, can be slowed by a moment's load (a shared 2-core machine timed the GAN's batch-64 step at
    0.5-3.5 s where a quiet one takes 0.06 s) while the probes' reading is not."""
    heavy = preflight.heaviest
    if heavy is None or heavy.batch_size == preflight.batch_size or \
            (heavy.step_samples is not None and heavy.step_samples != heavy.batch_size * heavy.accumulation_steps):
        return {}  # not timed, the baseline's own batch, or the batch cut to the dataset's size
    return {heavy.batch_size: heavy.step_seconds / heavy.accumulation_steps}


def too_slow_to_read(step_s: float, seconds: float, measure: Any, longest: float | None = None) -> bool:
    """Whether a compute reading of `seconds`, or of `longest` (the longest a cut reading is read again for:
    tuner.search._probe.longest_reading), cannot hold a warm-up step and the fewest windows at this step time,
    even with PREFLIGHT_MARGIN times the deadline (tuner.measure.ceiling.check_fits, the trials' own rule)."""
    from tuner.measure.ceiling import CeilingSkipped, check_fits, stable_measure

    try:
        check_fits(PREFLIGHT_MARGIN * max(seconds, longest or 0.0), step_s, stable_measure(seconds, measure))
    except CeilingSkipped:
        return True
    return False


def not_set_up(batch: int, loaders: list[dict[str, Any]], speeds: list[dict[str, Any]], step_s: float,
               image: bool, device: str) -> ProbeChoice:
    """The choice at a batch size whose step the pre-flight timed too slow for a reading: what probing it would
    have concluded (no compute reading, so tuner's defaults and the cheapest loader), without building its models,
    warming it up and reading a step that cannot fit the deadline (2.4 s of the default study's probes for 'model
    not read'). Its input ceiling is not read either: trials there measure it where their ceilings are measured."""
    found = {"compute": None, "computes": [None] * len(speeds), "image": image, "inputs": [None], "device": device}
    choice = choice_of(batch, loaders[:1], found, speeds)
    choice.preflight_step_s = step_s
    return choice
