"""Whether a time (or samples) to target reaches the target sooner than another config's, the way the export's header reads it (issue 51: one set of
figures). The verdict left out the runs that never reached the target while the export and the table counted
them at the cap, so runs of 10 and 11 s and one miss read "2.86x sooner ... beyond the noise" beside the pick's own
"at least 18.8 s". Here a confirmed figure counts its not-reached runs as its centre does (ConfirmedFigure.counted),
its spread judges the difference (the pooled noise of the runs that reached the target leaves the misses out),
a side counted with a miss is a bound ("at least", so the ratio is "at most" or "at least"), and a difference
within one evaluation step (what a time to target is read at) cannot tell the two apart at this K.

The concept is tuner.target's (the curve, its crossing, the step); this is only its judgement against the baseline,
here because it weighs the difference by the noise the judge measures (stats, resolution)."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.study import ConfirmedFigure, Objective, TrialRecord, fmt_metric
from tuner.analysis.resolution import WORSE, by_noise, mean_of, worse
from tuner.analysis.stats import Pooled, pool
from tuner.analysis.study import Study
from tuner.target import record_step


def _figure(record: TrialRecord, key: str) -> ConfirmedFigure | None:
    c = record.confirmed
    return c.figures.get(key) if c is not None else None


def _fmt(key: str, value: float) -> str:
    return f"{value:,.0f}" if key == "samples_to_target" else fmt_metric(key, value)


@dataclass(frozen=True)
class ToTarget:
    """Two configs' times (or samples) to target side by side, as the export's header reads them."""

    mine: list[float]
    theirs: list[float]
    how: str  # which figures: confirmed means, or single readings
    low_mine: bool  # a side counted with a miss: "at least"
    low_theirs: bool
    step: float | None  # one evaluation step: what a time to target is read at
    worse_by: float | None  # how much later the later side is, when beyond the noise (resolution.worse)
    pooled: Pooled | None

    @property
    def m(self) -> float:
        return mean_of(self.mine)

    @property
    def t(self) -> float:
        return mean_of(self.theirs)

    @property
    def within_step(self) -> bool:
        return self.step is not None and abs(self.m - self.t) <= self.step

    @property
    def apart(self) -> bool:
        """Whether the two differ beyond the noise and by more than one evaluation step."""
        return not self.within_step and self.worse_by is not None


def compare(study: Study, chosen: TrialRecord, other: TrialRecord, key: str) -> ToTarget | None:
    """`chosen` against `other` on `key` (time_to_target or samples_to_target): confirmed figures where both have
    them (not-reached runs counted as the export counts them), else single readings; None where a side has none."""
    mine_f, theirs_f = _figure(chosen, key), _figure(other, key)
    if mine_f is not None and theirs_f is not None:
        mine, theirs = mine_f.counted(), theirs_f.counted()
        pooled = pool([mine, theirs])  # the figures' own spreads, misses counted, as the export's intervals
        missed = mine_f.censored is not None and mine_f.not_reached or theirs_f.censored is not None and \
            theirs_f.not_reached
        how = "confirmed mean vs confirmed mean (geometric, over the re-runs" + \
            (", a not-reached run counted as the export counts it)" if missed else ")")
        low_m, low_t = mine_f.at_least, theirs_f.at_least
    else:
        a, b = chosen.value(key), other.value(key)
        if a is None or b is None:
            return None
        mine, theirs, pooled, how, low_m, low_t = [a], [b], study.pooled(key), "single reading vs single reading", \
            False, False
    if mean_of(mine) <= 0 or mean_of(theirs) <= 0:
        return None
    steps = [s for s in (record_step(chosen, mine_f, key), record_step(other, theirs_f, key)) if s is not None]
    minimized = Objective(metric=key, direction="minimize")
    sooner = mean_of(mine) < mean_of(theirs)
    diff = worse(mine, theirs, minimized, pooled) if not sooner else worse(theirs, mine, minimized, pooled)
    return ToTarget(mine, theirs, how, bool(low_m), bool(low_t), max(steps) if steps else None, diff, pooled)


def versus_baseline(study: Study, chosen: TrialRecord, baseline: TrialRecord, key: str) -> str | None:
    """`reaches the target at most 1.62x sooner than the baseline: time_to_target at least 18.8 vs 30.5 (...),
    within the noise`, or `... cannot tell apart at this K`; None where a side has no figure."""
    c = compare(study, chosen, baseline, key)
    if c is None:
        return None
    m, t = c.m, c.t
    x, sooner = max(m, t) / min(m, t), m < t
    figures = (f"{key} {'at least ' if c.low_mine else ''}{_fmt(key, m)} vs {'at least ' if c.low_theirs else ''}"
               f"{_fmt(key, t)} ({c.how})")
    if c.within_step:
        unit = "samples" if key == "samples_to_target" else "s"
        return (f"reaches the target within one evaluation step of the baseline: {figures}, {_fmt(key, abs(m - t))} "
                f"{unit} apart, under one evaluation step ({_fmt(key, c.step or 0.0)} {unit}): cannot tell apart at "
                f"this K")
    # a side counted with a miss is a lower bound: the pick's makes the ratio sooner at most, the baseline's at least
    bound = "" if c.low_mine == c.low_theirs else ("at most " if c.low_mine == sooner else "at least ")
    how_much = (f"{bound}{x:.2f}x {'sooner' if sooner else 'later'}" if key == "time_to_target" else
                f"in {bound}{x:.2f}x {'fewer' if sooner else 'more'} samples")
    if c.worse_by is None:
        beyond = "within the noise"
    elif by_noise(c.mine, c.theirs, c.pooled):
        beyond = "beyond the noise"
    else:
        beyond = f"more than the {WORSE:.0%} tuner calls a difference where no re-runs measured the noise"
    return f"reaches the target {how_much} than the baseline: {figures}, {beyond}"
