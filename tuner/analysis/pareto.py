"""Pareto ranks over a study's trials and the rules `tuner export --pick` uses to choose one.

Only complete trials whose objective values are all finite take part: a trial that ran out of memory, diverged
or errored has no quality to trade against, and is shown apart rather than ranked.

The knee rule (`--pick knee`, the default):
  1. Take the Pareto front: the trials that no other trial beats on every objective at once (rank 0).
  2. Rescale each objective to [0, 1] over the front, 1 being the front's best value and 0 its worst (an
     objective that is equal across the front counts as 1 for all).
  3. Choose the trial closest (Euclidean distance) to the ideal point where every rescaled objective is 1: the
     most balanced trade-off. Ties go to the higher throughput, then to the lower trial number.
`--pick throughput` takes the fastest front trial, `--pick quality` the best-quality one; `--min-quality X` first
drops the trials whose quality is worse than X (above X for a metric to minimize, below X for one to maximize).

Every function takes an optional `value(record, metric)`: the figure to rank by. It defaults to what the trial
measured; a study with confirmed (re-measured) figures passes those instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

from tuner.errors import StudyError
from tuner.study import Objective, THROUGHPUT, TrialRecord, quality_objective

Pick = Literal["knee", "throughput", "quality"]
PICKS: tuple[str, ...] = ("knee", "throughput", "quality")
Value = Callable[[TrialRecord, str], "float | None"]


def measured(record: TrialRecord, metric: str) -> float | None:
    return record.value(metric)


def rankable(record: TrialRecord, objectives: list[Objective], value: Value = measured) -> bool:
    return record.complete and all(value(record, o.metric) is not None for o in objectives)


def _v(record: TrialRecord, o: Objective, value: Value) -> float:
    v = value(record, o.metric)
    assert v is not None, "callers filter with rankable()"
    return v


def dominates(a: TrialRecord, b: TrialRecord, objectives: list[Objective], value: Value = measured) -> bool:
    """a dominates b: no worse on every objective and strictly better on at least one."""
    strictly = False
    for o in objectives:
        va, vb = _v(a, o, value), _v(b, o, value)
        if o.better(vb, va):
            return False
        strictly = strictly or o.better(va, vb)
    return strictly


def pareto_ranks(records: Iterable[TrialRecord], objectives: list[Objective],
                 value: Value = measured) -> dict[int, int]:
    """Non-dominated sorting: {trial: rank}, 0 being the Pareto front. Unrankable trials get no entry."""
    remaining = [r for r in records if rankable(r, objectives, value)]
    ranks: dict[int, int] = {}
    rank = 0
    while remaining:
        front = [r for r in remaining
                 if not any(dominates(o, r, objectives, value) for o in remaining if o is not r)]
        for r in front:
            ranks[r.trial] = rank
        remaining = [r for r in remaining if r.trial not in ranks]
        rank += 1
    return ranks


def _throughput(record: TrialRecord, value: Value) -> float:
    v = value(record, THROUGHPUT)
    return v if v is not None else -math.inf


def knee_distances(front: list[TrialRecord], objectives: list[Objective],
                   value: Value = measured, scale: list[TrialRecord] | None = None) -> dict[int, float]:
    """Each front trial's distance to the ideal point after rescaling every objective to [0, 1] over `scale` (all
    the study's complete trials; the front when not given). Over the front alone a front of two trials is always a
    tie, however far apart their trade-offs are: 1% more throughput would weigh as much as a 20x better FID."""
    bounds = {}
    for o in objectives:
        values = [_v(r, o, value) for r in (scale or front)]
        bounds[o.metric] = (min(values), max(values))
    out = {}
    for r in front:
        dist2 = 0.0
        for o in objectives:
            lo, hi = bounds[o.metric]
            v = _v(r, o, value)
            goodness = 1.0 if hi == lo else ((v - lo) if o.maximize else (hi - v)) / (hi - lo)
            dist2 += (1.0 - goodness) ** 2
        out[r.trial] = math.sqrt(dist2)
    return out


def knee(front: list[TrialRecord], objectives: list[Objective], value: Value = measured,
         scale: list[TrialRecord] | None = None) -> TrialRecord:
    """The knee of a Pareto front, objectives rescaled over `scale` (see knee_distances). Ties: higher throughput,
    then lower trial number."""
    if not front:
        raise ValueError("knee of an empty front")
    dist = knee_distances(front, objectives, value, scale)
    return min(front, key=lambda r: (round(dist[r.trial], 12), -_throughput(r, value), r.trial))


def choose(records: list[TrialRecord], objectives: list[Objective], pick: Pick = "knee",
           min_quality: float | None = None, study: str = "study", value: Value = measured,
           scale: list[TrialRecord] | None = None) -> TrialRecord:
    """The trial `tuner export --pick` exports. Raises StudyError (one line) when nothing qualifies. `scale`: the
    trials whose range rescales the objectives for the knee (the study's complete trials, where `records` is a part
    of them: the confirmed ones); `records` when not given. Over the confirmed baseline and one confirmed trial
    alone, the knee was a tie whatever their trade-off, settled by throughput: a trial 27% better on the loss lost
    to a baseline 4% faster."""
    complete = [r for r in records if rankable(r, objectives, value)]
    if not complete:
        states = sorted({r.state for r in records})
        have = f"{len(records)} trials: {', '.join(states)}" if records else "no trials yet"
        raise StudyError(f"study '{study}' has no complete trial ({have}); nothing to pick until a trial completes")
    quality = quality_objective(objectives)
    if quality is None and (pick == "quality" or min_quality is not None):
        what = "--pick quality" if pick == "quality" else "--min-quality"
        raise StudyError(f"study '{study}' has no quality objective, so {what} has nothing to use; "
                         f"use --pick throughput")
    if min_quality is not None and quality is not None:
        ok = [r for r in complete if quality.meets(_v(r, quality, value), min_quality)]
        if not ok:
            best = max(complete, key=lambda r: quality.goodness(_v(r, quality, value)))
            raise StudyError(
                f"no complete trial in study '{study}' has {quality.metric} {quality.comparison} {min_quality:g}; "
                f"the best is {_v(best, quality, value):g} (trial {best.trial}): relax --min-quality")
        complete = ok
    ranks = pareto_ranks(complete, objectives, value)
    front = [r for r in complete if ranks.get(r.trial) == 0]
    if pick == "throughput":
        return max(front, key=lambda r: (_throughput(r, value), -r.trial))
    if pick == "quality":
        assert quality is not None
        return max(front, key=lambda r: (quality.goodness(_v(r, quality, value)), _throughput(r, value), -r.trial))
    if pick == "knee":
        wide = [r for r in scale if rankable(r, objectives, value)] if scale else []
        return knee(front, objectives, value, scale=wide or complete)
    raise ValueError(f"unknown pick {pick!r}")
