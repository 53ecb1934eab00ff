"""Readings that cannot be what they say: the `suspect` metric (tuner.study.metrics) of a trial or a re-run.

A reading is suspect when
  - it has a single timed window (its spread of 0 says nothing: nothing was there to disagree), or
  - its timed windows disagree beyond what the study's noise allows: the windows' spread ((max - min) / median)
    is above the 99th percentile of the range of that many windows (range_quantile: 3.6 standard deviations for
    2 windows, 4.6 for 5, from the studentized range, so the estimate's own df count) times the window-to-window
    noise within a run (WindowNoise, pooled over the confirmation re-runs' windows: like with like, a range of
    windows within one run against the spread of windows within runs, not the run-to-run noise), so a steady
    config is flagged 1 time in 100 whatever its window count; and never below MIN_SPREAD (the allowance when the
    study has no re-runs yet); a figure from windows that far apart is one lucky or unlucky window, not the
    config; or
  - its throughput is above CEILING_TOLERANCE of its own compute ceiling (the same model fed a batch already on
    the device): no loop runs faster than its model allows, so one of the two readings is wrong.
The flag is derived when a study is read (it needs the study's noise floor), so every view shows it, and a suspect
trial cannot win the study on its own: the pick (tuner.analysis.verdict) passes it over unless its confirmation
re-runs cleared it. That holds where the pick ranks a figure read from the windows (`ranks_windows`): a study that
ranks time to target alone stops each trial at its target, so its fastest trials have one window, and their
re-runs too; it passed them over for a throughput it does not rank.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from tuner.study import Objective, TrialResult, finite, metric

KEY = "suspect"
MIN_SPREAD = 0.5  # windows of one config that differ by more than half their median, whatever the noise
FALSE_ALARM = 0.01  # a steady reading is flagged for its windows' spread 1 time in 100
DEFAULT_WINDOWS = 5  # a record that kept its spread but not its windows: the timing's usual count
CEILING_TOLERANCE = 1.05  # above 105% of its own compute ceiling: a reading the model cannot produce


@dataclass(frozen=True)
class WindowNoise:
    """The spread of one run's timed windows around that run's own level (relative: sd of log samples/s), pooled
    over the confirmation re-runs, with its degrees of freedom."""

    sd: float
    df: int


def window_noise(reruns: Iterable[TrialResult]) -> WindowNoise | None:
    """WindowNoise over the complete re-runs that timed at least two windows (None without any)."""
    groups = [[math.log(w) for w in r.windows] for r in reruns
              if r.complete and len(r.windows) >= 2 and all(w > 0 for w in r.windows)]
    df = sum(len(g) - 1 for g in groups)
    if df < 1:
        return None
    sd = math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in groups) / df)
    return WindowNoise(sd, df) if math.isfinite(sd) else None


@functools.lru_cache(maxsize=128)
def range_quantile(n: int, df: int | None = None, level: float = 1 - FALSE_ALARM) -> float:
    """The `level` quantile of the range of n normal draws in standard deviations, the sd estimated with df
    degrees of freedom (the studentized range; None: known). Numerically: P(range <= w) = n x integral of
    phi(x) (Phi(x + w) - Phi(x))^(n - 1), averaged over the sd estimate's chi distribution; then bisection."""
    import numpy as np
    from scipy.special import gammaln, ndtr

    x = np.linspace(-7.0, 7.0, 141)
    phi = np.exp(-x * x / 2) / math.sqrt(2 * math.pi) * (x[1] - x[0])
    if df is None:
        s, weight = np.ones(1), np.ones(1)
    else:  # s = sd estimate / sd ~ sqrt(chi2_df / df), its sd about 1 / sqrt(2 df)
        width = 9 / math.sqrt(2 * df)
        s = np.linspace(max(1e-3, 1 - width), 1 + 2 * width, 81)
        logf = (math.log(2) + (df / 2) * math.log(df / 2) - gammaln(df / 2) + (df - 1) * np.log(s)
                - df * s * s / 2)
        weight = np.exp(logf) * (s[1] - s[0])

    def cdf(q: float) -> float:
        w = (q * s)[:, None]
        inner = n * np.sum(phi * (ndtr(x + w) - ndtr(x)) ** (n - 1), axis=1)
        return float(np.sum(weight * inner) / np.sum(weight))

    lo, hi = 0.0, 40.0
    for _ in range(24):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < level else (lo, mid)
    return hi


def allowed_spread(noise: WindowNoise | None, windows: int = DEFAULT_WINDOWS) -> float:
    """The window spread ((max - min) / median) a reading of `windows` windows may have in a study whose window
    noise is `noise` (a record that kept no windows is judged by it)."""
    if noise is None or windows < 2:
        return MIN_SPREAD
    return max(MIN_SPREAD, range_quantile(windows, noise.df) * noise.sd)


def allowed_ratio(noise: WindowNoise, windows: int) -> float:
    """How far apart (fastest / slowest) `windows` windows of a steady reading may be: the range of their logs,
    like the noise's, at the 99th percentile; never under 1 + MIN_SPREAD."""
    return max(1 + MIN_SPREAD, math.exp(range_quantile(windows, noise.df) * noise.sd))


def reads_windows(key: str) -> bool:
    """Whether a figure is read from the timed windows (the speed group of tuner.study.metrics: throughput, its
    spread, the data wait), so that a suspect reading says nothing about it."""
    return metric(key).group == "speed"


def ranks_windows(objectives: Iterable[Objective]) -> bool:
    """Whether a pick on these objectives rests on a figure read from the windows, so a suspect reading is passed
    over (a time to target, a loss or FID is read from evaluations, whatever the windows did)."""
    return any(reads_windows(o.metric) for o in objectives)


def reason(result: TrialResult, noise: WindowNoise | None = None) -> str | None:
    """Why this reading is suspect, in a few words; None when nothing is wrong with it."""
    if not result.complete:
        return None
    out = []
    if len(result.windows) == 1:
        out.append("one timed window")
    spread = finite(result.metrics.get("throughput_spread"))
    windows = [w for w in result.windows if w > 0]
    if noise is not None and len(windows) >= 2:  # judged on the windows' log range, as the noise is measured
        ratio, most = max(windows) / min(windows), allowed_ratio(noise, len(windows))
        if ratio > most:
            out.append(f"windows {ratio:.2f}x apart > {most:.2f}x for {len(windows)}")
    else:
        limit = allowed_spread(noise, len(result.windows) if result.windows else DEFAULT_WINDOWS)
        if spread is not None and spread > limit:
            out.append(f"window spread {spread:.0%} > {limit:.0%}")
    share = finite(result.metrics.get("of_compute_ceiling"))
    if share is None:
        thr, ceiling = result.value("throughput"), result.value("compute_ceiling")
        share = thr / ceiling if thr is not None and ceiling else None
    if share is not None and share > CEILING_TOLERANCE:
        out.append(f"{share:.0%} of compute ceiling")
    return "; ".join(out) or None


def flag(result: TrialResult, noise: WindowNoise | None) -> None:
    """Set (or clear) the result's `suspect` metric."""
    why = reason(result, noise)
    if why:
        result.metrics[KEY] = why
    else:
        result.metrics.pop(KEY, None)


def cleared(reruns: list[TrialResult], noise: WindowNoise | None) -> bool:
    """A suspect trial's confirmation clears it when most of its complete re-runs are not suspect."""
    ok = [r for r in reruns if r.complete]
    return bool(ok) and sum(reason(r, noise) is None for r in ok) * 2 > len(ok)
