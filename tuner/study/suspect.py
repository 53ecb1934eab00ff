"""Readings that cannot be what they say: the `suspect` metric (tuner.study.metrics) of a trial or a re-run.

A reading is suspect when
  - it has a single timed window (its spread of 0 says nothing: nothing was there to disagree), or
  - its timed windows disagree beyond what the study's noise allows: the windows' spread ((max - min) / median)
    is above SPREAD_FACTOR x the study's run-to-run noise floor (from its confirmation re-runs), and never below
    MIN_SPREAD (the allowance when the study has no noise floor yet); a figure from windows that far apart is
    one lucky or unlucky window, not the config; or
  - its throughput is above CEILING_TOLERANCE of its own compute ceiling (the same model fed a batch already on
    the device): no loop runs faster than its model allows, so one of the two readings is wrong.
The flag is derived when a study is read (it needs the study's noise floor), so every view shows it, and a suspect
trial cannot win the study on its own: the pick (tuner.study.verdict) passes it over unless its confirmation
re-runs cleared it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tuner.study.metrics import finite
from tuner.study.record import Confirmed, TrialResult

KEY = "suspect"
MIN_SPREAD = 0.5  # windows of one config that differ by more than half their median, whatever the noise floor
SPREAD_FACTOR = 5.0  # ~ the 99th percentile of the range of 5 normal draws is 4.6 standard deviations
CEILING_TOLERANCE = 1.05  # above 105% of its own compute ceiling: a reading the model cannot produce


def allowed_spread(noise_sd: float | None) -> float:
    """The window spread a reading may have in a study whose run-to-run noise is `noise_sd` (relative)."""
    return max(MIN_SPREAD, SPREAD_FACTOR * noise_sd) if noise_sd is not None else MIN_SPREAD


def reason(result: TrialResult, noise_sd: float | None = None) -> str | None:
    """Why this reading is suspect, in a few words; None when nothing is wrong with it."""
    if not result.complete:
        return None
    out = []
    if len(result.windows) == 1:
        out.append("one timed window")
    spread = finite(result.metrics.get("throughput_spread"))
    limit = allowed_spread(noise_sd)
    if spread is not None and spread > limit:
        out.append(f"window spread {spread:.0%} > {limit:.0%}")
    share = finite(result.metrics.get("of_compute_ceiling"))
    if share is None:
        thr, ceiling = result.value("throughput"), result.value("compute_ceiling")
        share = thr / ceiling if thr is not None and ceiling else None
    if share is not None and share > CEILING_TOLERANCE:
        out.append(f"{share:.0%} of compute ceiling")
    return "; ".join(out) or None


def noise_sd(confirmed: Iterable[Confirmed | None]) -> float | None:
    """The relative run-to-run noise of throughput over the confirmed trials' re-runs (None without any)."""
    from tuner.study.stats import noise_floor

    groups = [g for c in confirmed if c is not None and "throughput" in c.figures for g in c.groups("throughput")]
    floor = noise_floor(groups)
    return floor.relative_sd if floor is not None and math.isfinite(floor.relative_sd) else None


def flag(result: TrialResult, noise: float | None) -> None:
    """Set (or clear) the result's `suspect` metric."""
    why = reason(result, noise)
    if why:
        result.metrics[KEY] = why
    else:
        result.metrics.pop(KEY, None)


def cleared(reruns: list[TrialResult], noise: float | None) -> bool:
    """A suspect trial's confirmation clears it when most of its complete re-runs are not suspect."""
    ok = [r for r in reruns if r.complete]
    return bool(ok) and sum(reason(r, noise) is None for r in ok) * 2 > len(ok)
