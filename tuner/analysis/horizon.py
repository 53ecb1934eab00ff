"""The horizon check's figures and its word (issue 51, item 6): does the study's speed-up hold when the user trains
longer? A study reads time to target at a target its short trials reach (a derived one: what the baseline reaches
in a third of one trial), which says little about a run of hours. `tuner export --horizon` re-trains the pick and
the baseline to the horizon, a few seeds each, sets a harder target (by default the quality the baseline reaches
at the horizon, read as tuner.target derives a target: the mean of its last evaluations), reads each run's
time (or samples) to it between the two evaluations around the crossing, and compares the ratio with the study's.

The ratio is the baseline's over the pick's (geometric means, above 1: the pick is sooner), with the interval the
confirmed ratios use (tuner.analysis.stats.ratio_interval on the two sides' pooled log spread), widened to at least
one evaluation step on either side (a run is read between two evaluations). A run that has not met the target by
the horizon counts at its last evaluation, a lower bound, as the study's not-reached runs count."""

from __future__ import annotations

import math
from typing import Any

from tuner.config import Target
from tuner.study import ConfirmedFigure, TrialRecord
from tuner.target import SMOOTH_EVALS, CurvePoint, crossing, curve_points
from tuner.analysis.stats import Interval, pool, ratio_interval

HOLDS, SHRINKS, REVERSES = "holds", "shrinks", "reverses"


def judge(horizon: Interval, study: Interval | None) -> str:
    """The one word for a horizon ratio (baseline over pick, above 1: the pick is sooner) against the study's:

    - `reverses`: the horizon ratio's centre is below 1: at the horizon the pick reaches the target later than the
      baseline (where its interval includes 1 the text says more seeds would tell, as for `holds`).
    - `shrinks`: its centre is 1 or more, but it lies below the study's ratio: the top of its interval (its centre
      where it has none, one seed a side) is under the bottom of the study's interval (the study's centre where it
      has none). Still sooner, by less than the study said.
    - `holds`: otherwise (centre 1 or more, and its interval reaches the study's ratio or lies above it; also when
      the study read no ratio to compare with). Where its interval includes 1 the text says so (more seeds would
      tell), but the word stays: the horizon is consistent with the study's speed-up.
    """
    if horizon.centre < 1.0:
        return REVERSES
    if study is not None:
        top = horizon.high if horizon.high is not None else horizon.centre
        bottom = study.low if study.low is not None else study.centre
        if top < bottom:
            return SHRINKS
    return HOLDS


def settled_quality(curve: list[list[Any]]) -> float | None:
    """The quality one run settles at: the mean of its last SMOOTH_EVALS evaluations with a reading (as
    tuner.target.derive_target reads a baseline's); None: it read none."""
    last = [p.quality for p in curve_points(curve) if p.quality is not None and math.isfinite(p.quality)]
    last = last[-SMOOTH_EVALS:]
    return sum(last) / len(last) if last else None  # type: ignore[arg-type]


def horizon_target(baseline_curves: list[list[list[Any]]]) -> float | None:
    """The horizon's default target: the mean over the baseline's runs of the quality each settles at by the
    horizon (settled_quality); None: no run read a quality."""
    settled = [q for c in baseline_curves if (q := settled_quality(c)) is not None]
    return sum(settled) / len(settled) if settled else None


def to_target(curve: list[list[Any]], target: Target, key: str) -> tuple[float | None, bool]:
    """(value, reached): the run's training seconds (key time_to_target) or samples (samples_to_target) at the
    crossing of `target` (tuner.target.crossing: between the two evaluations around it); not reached, its
    last evaluation's, a lower bound. (None, False): no evaluation."""
    points: list[CurvePoint] = curve_points(curve)
    if not points:
        return None, False
    hit = crossing(points, target)
    at = hit if hit is not None else points[-1]
    value = float(at.samples) if key == "samples_to_target" else at.seconds
    return (value if value > 0 else None), hit is not None


def horizon_ratio(pick: list[float], baseline: list[float], step: float | None = None) -> Interval | None:
    """The baseline's values over the pick's (geometric means), with ratio_interval's interval from the two
    sides' pooled log spread, widened to hold the ratio read one evaluation `step` apart on each side (a run is
    read between two evaluations; runs that all met the target at one evaluation read no spread)."""
    iv = ratio_interval(baseline, pick, pool([pick, baseline]))
    if iv is None or step is None or step <= 0:
        return iv
    b, a = iv.centre * _gmean(pick), _gmean(pick)
    low = (b - step / 2) / (a + step / 2) if b > step / 2 else None
    high = (b + step / 2) / (a - step / 2) if a > step / 2 else None
    if iv.low is None or iv.high is None:
        return Interval(iv.centre, low, high) if low is not None and high is not None else iv
    return Interval(iv.centre, min(iv.low, low) if low is not None else iv.low,
                    max(iv.high, high) if high is not None else iv.high)


def _gmean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def study_ratio(pick: TrialRecord, baseline: TrialRecord, key: str) -> Interval | None:
    """The study's own ratio at its target, baseline over pick: of the confirmed figures (not-reached runs counted
    as the export counts them) with their interval, else of the single readings, without one; None: a side has
    no figure."""
    def fig(r: TrialRecord) -> ConfirmedFigure | None:
        return r.confirmed.figures.get(key) if r.confirmed is not None else None

    mine, theirs = fig(pick), fig(baseline)
    if mine is not None and theirs is not None and mine.counted() and theirs.counted():
        a, b = mine.counted(), theirs.counted()
        return ratio_interval(b, a, pool([a, b]))
    x, y = pick.value(key), baseline.value(key)
    if not x or not y or x <= 0 or y <= 0:
        return None
    return Interval(y / x, None, None)


def fmt_ratio(iv: Interval) -> str:
    """`1.42x (1.18-1.71x)`, or `1.42x` without an interval."""
    if iv.low is None or iv.high is None:
        return f"{iv.centre:.2f}x"
    return f"{iv.centre:.2f}x ({iv.low:.2f}-{iv.high:.2f}x)"


def horizon_text(word: str, horizon: Interval, study: Interval | None, key: str, horizon_desc: str,
                 target_desc: str, runs: int, missed: dict[str, int]) -> str:
    """The check's one line: the word, the ratio at the horizon and the study's, and what it stands on."""
    what = "sooner" if key == "time_to_target" else "in fewer samples"
    base = (f"the speed-up {word} at {horizon_desc}: the pick reaches {target_desc} {fmt_ratio(horizon)} {what} "
            f"than the baseline ({runs} seeds each, interleaved)")
    base += f", against {fmt_ratio(study)} in the study" if study is not None else ", the study read no ratio"
    notes = []
    if horizon.low is not None and horizon.low <= 1.0 <= (horizon.high or 0.0):
        # a reversal too: a VAE check read "reverses" at 0.82x (0.52-1.30x), which 3 seeds a side cannot tell from 1
        notes.append("its interval includes 1: more seeds would tell")
    for side, n in missed.items():
        if n:
            notes.append(f"{n} {side} run{'s' if n > 1 else ''} did not reach it by the horizon, counted there "
                         f"(at least)")
    return base + ("; " + "; ".join(notes) if notes else "")
