"""Whether a study's quality figures can tell its trials apart, and whether one trial's quality is worse than
another's beyond the noise.

A short budget can leave every model where it started: a classifier at chance (validation loss ~ ln(classes) in
every trial), a GAN's FID all alike. Ranking on such figures ranks noise, so when every complete trial's quality
lies within the noise of every other's, the study says so and the pick goes by throughput alone.

The noise of a quality figure is the run-to-run spread the confirmation re-runs measured (pooled over the confirmed
trials, tuner.analysis.stats): two single readings of one config differ by up to t x sd x sqrt(2). Without re-runs,
RESOLUTION (relative) stands for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tuner.study import Objective, TrialRecord, fmt_metric, metric
from tuner.analysis.stats import LEVEL, Pooled, _t

RESOLUTION = 0.02  # without re-runs: quality figures within 2% of each other are one figure
WORSE = 0.10  # without re-runs: a single reading of quality worse by more than 10% is worse beyond the noise


def _band(values: list[float], pooled: Pooled | None, fallback: float) -> tuple[float, float]:
    """(lo, hi) of the values on the scale their noise is measured on, and the largest difference noise makes."""
    lo, hi = min(values), max(values)
    if pooled is not None and pooled.df >= 1:
        width = _t(pooled.df, LEVEL) * pooled.sd * math.sqrt(2)
        if pooled.log and lo > 0:
            return math.log(hi) - math.log(lo), width
        if not pooled.log:
            return hi - lo, width
    mid = max(abs(v) for v in values) or 1.0
    return (hi - lo) / mid, fallback


def unresolved(records: list[TrialRecord], quality: Objective, value: Callable[[TrialRecord, str], float | None],
               pooled: Pooled | None) -> str | None:
    """A sentence when every one of these trials' quality is within the noise of the others' (None: it ranks)."""
    values = [v for r in records if (v := value(r, quality.metric)) is not None]
    if len(values) < 2:
        return None
    diff, noise = _band(values, pooled, RESOLUTION)
    if diff > noise:
        return None
    label = metric(quality.metric).label
    lo, hi = fmt_metric(quality.metric, min(values)), fmt_metric(quality.metric, max(values))
    figure = lo if lo == hi else f"{lo}-{hi}"
    return (f"{label} {figure} in every trial, within the noise of each other: too little training to rank "
            f"quality, so the pick goes by throughput alone; raise the budget")


def worse(mine: list[float], theirs: list[float], quality: Objective, pooled: Pooled | None) -> float | None:
    """How much worse (a fraction) `mine` is than `theirs` when beyond the noise; None when it is not."""
    if not mine or not theirs:
        return None
    a, b = sum(mine) / len(mine), sum(theirs) / len(theirs)
    if b == 0:
        return None
    frac = ((a - b) if not quality.maximize else (b - a)) / abs(b)
    if frac <= 0:
        return None
    if pooled is not None and pooled.df >= 1 and (not pooled.log or min(mine + theirs) > 0):
        half = _t(pooled.df, LEVEL) * pooled.sd * math.sqrt(1 / len(mine) + 1 / len(theirs))
        diff = abs(math.log(a) - math.log(b)) if pooled.log else abs(a - b)
        return frac if diff > half else None
    return frac if frac > WORSE else None
