"""The split of a kept effective batch by probes (tuner.search._probe runs them), where it is exact (exact_split).

The split of the workload's own effective batch into micro-batch x accumulation is exact where the pre-flight found
no batch-statistics layer (every split computes the same gradient): then every micro-batch of it is probed with its
own accumulation (up to MAX_SPLITS) and the one predicted fastest is every trial's (choose_split: within TOLERANCE,
the workload's own, else the largest). Where the fastest and the workload's own micro-batch are predicted within
CLOSE of each other, both are read again first, in reverse order, with their chosen loader and speed knobs, and each
keeps its best reading (split_read_again; the readings in probes.json): re-read rather than simply preferring the
workload's own within CLOSE, so that a split really 5-10% faster is still taken, and decided on the best reading as
the speed knobs are (a moment's load only ever slows a reading).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.knobs import heavy_knobs
from tuner.search._loader_probe import TOLERANCE, choose
from tuner.space import Space
from tuner.study import ProbeChoice

if TYPE_CHECKING:
    from tuner.search._options import SearchPlan

MAX_SPLITS = 6  # a split the probes decide: all its micro-batches probed, where it has no more than this many


def exact_split(plan: "SearchPlan", space: Space, context: dict[str, Any]) -> bool:
    """Whether the probes decide how the kept effective batch is split: the space searches the split of the
    workload's own effective batch, and the pre-flight found no batch-statistics layer in the models (every split
    then computes the same gradient: a speed knob). Unknown (no pre-flight on the trials' device): the trials
    search it."""
    from tuner.space import kept_split

    return ("batch_size" in space.reachable(context) and kept_split(space) is not None
            and plan.preflight.batch_statistics == [])


def _rate(choice: ProbeChoice) -> float | None:
    """What a trial at this choice's micro-batch is predicted to reach: its chosen loader's prediction, else the
    compute ceiling with its chosen speed knobs."""
    taken = next((p.predicted for p in choice.probes if p.loader == choice.loader and p.predicted), None)
    return taken or choice.compute_ceiling


def choose_split(choices: list[ProbeChoice], effective: int, own: int | None) -> dict[str, int] | None:
    """The split of the kept effective batch (micro-batch x accumulation) the probes predict fastest, where the
    split is exact (no batch statistics: every split computes the same gradient). Among the micro-batches predicted
    within TOLERANCE of the best: the workload's own (`own`), else the largest (fewest accumulation steps). None
    where no micro-batch was read (the trials then search the split)."""
    rated = [(r, c) for c in choices if (r := _rate(c))]
    if not rated:
        return None
    best = max(r for r, _ in rated)
    good = [c for r, c in rated if r >= (1 - TOLERANCE) * best]
    pick = next((c for c in good if c.batch_size == own), None) or max(good, key=lambda c: c.batch_size)
    batch, accumulation = heavy_knobs()  # tuner.knobs: the effective batch's factors
    return {batch: pick.batch_size, accumulation: effective // pick.batch_size}


def split_rivals(choices: list[ProbeChoice], own: int | None) -> list[ProbeChoice]:
    """The micro-batches read again before the split is chosen (issue 52 item 5): the one predicted fastest and
    the workload's own, where they are predicted within CLOSE of each other (tuner.train.probe.CLOSE), in the order
    first read; none where the workload's own is the fastest, was not read, or stands further behind."""
    from tuner.train import CLOSE  # a reading's noise on a shared machine

    rated = [(r, c) for c in choices if (r := _rate(c))]
    mine = next((r for r, c in rated if c.batch_size == own), None)
    if mine is None:
        return []
    best, fastest = max(rated, key=lambda rc: rc[0])
    if fastest.batch_size == own or mine < (1 - CLOSE) * best:
        return []
    return [c for c in choices if c.batch_size in (own, fastest.batch_size)]


def split_read_again(choices: list[ProbeChoice], own: int | None, read: Any, *, on_cpu: bool) -> None:
    """Read the split's rivals (split_rivals) again, in reverse order, each with its chosen loader and speed knobs
    (`read(choice)`: its compute ceiling, or None), before choose_split decides: one reading per micro-batch on a
    busy machine chose 32 x 2 for nanoGPT where 64 x 1 then ran faster. Each keeps its best reading, as the speed
    knobs do (a moment's load only ever slows one), in `readings`, and its loader is chosen again against it."""
    for c in reversed(split_rivals(choices, own)):
        c.readings = c.readings or [c.compute_ceiling]
        c.readings.append(read(c))
        c.compute_ceiling = max((v for v in c.readings if v is not None), default=None)
        c.loader = choose(c.compute_ceiling, c.probes, on_cpu=on_cpu)
