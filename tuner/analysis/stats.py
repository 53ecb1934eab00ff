"""Figures with their uncertainty, from the confirmation phase's re-runs.

Throughput varies multiplicatively (a busier machine slows a run by a fraction), so figures are handled on the log
scale: a config's centre is the geometric mean of its re-runs, and its spread is the study's *pooled* run-to-run
variation (the noise floor): the standard deviation of log values around each config's own mean, pooled over every
confirmed config. All configs ran on the same machine in the same interleaved phase, so one noise level serves
them all, and pooling gives an interval with (configs x (re-runs - 1)) degrees of freedom instead of the one degree
two re-runs of a single config would give. Metrics that are not positive everywhere are pooled on the linear scale.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass

from tuner.study import TO_TARGET, Confirmed, ConfirmedFigure, Rerun, TrialResult, finite

LEVEL = 0.95
CENTRE_METHOD = ("geometric mean of the re-runs; 95% t-interval from the run-to-run variation pooled over the "
                 "confirmed configs (log scale); a config read in several rounds: mean of the round means, "
                 "t-interval from their spread (rounds - 1 df), never narrower than the pooled one")
RATIO_METHOD = "ratio of geometric means; 95% t-interval from the pooled run-to-run variation (log scale)"
NOISE_METHOD = "pooled standard deviation of log throughput over the confirmed configs' re-runs"
# One config read twice on a shared machine differs by 8-20%: two single readings closer than this are not told
# apart, whatever interval the re-runs' pooled noise would give them (tuner.analysis.versus, tuner.analysis.held).
SINGLE_NOISE = 0.15


@functools.lru_cache(maxsize=256)
def _t(df: float, level: float = LEVEL) -> float:
    """Student's t quantile; cached: scipy's costs ~4 ms a call, and loading a study asks it for every figure of
    every confirmed trial (300 calls, 1.3 s of the confirmation phase's turns between re-runs). From
    scipy.special (the same function scipy.stats.t.ppf evaluates): importing scipy.stats took 0.8 s of the
    driver's last turn of a default study, scipy.special 0.25 s."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + level / 2))


@dataclass(frozen=True)
class Interval:
    centre: float
    low: float | None  # None: no interval (no repeated config to learn the noise from)
    high: float | None

    def contains(self, value: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= value <= self.high

    def overlaps(self, other: "Interval") -> bool:
        if None in (self.low, self.high, other.low, other.high):
            return False
        return self.low <= other.high and other.low <= self.high  # type: ignore[operator]


@dataclass(frozen=True)
class Pooled:
    """The pooled spread of one metric: `sd` on the log scale (log=True) or the linear scale, with its df."""

    sd: float
    df: int
    log: bool

    def interval(self, values: list[float], level: float = LEVEL) -> Interval:
        c = centre(values, self.log)
        if self.df < 1:
            return Interval(c, None, None)
        half = _t(self.df, level) * self.sd / math.sqrt(len(values))
        if self.log:
            return Interval(c, c * math.exp(-half), c * math.exp(half))
        return Interval(c, c - half, c + half)


    def prediction(self, values: list[float], level: float = LEVEL, runs: int = 1) -> Interval:
        """Where one more run reads (a prediction interval): a re-training is a single run, not the mean of n,
        so the interval of the mean would be too narrow to hold it. `runs`: where the mean of that many more runs
        reads (a two-sample interval: both sides' noise counts)."""
        c = centre(values, self.log)
        if self.df < 1:
            return Interval(c, None, None)
        half = _t(self.df, level) * self.sd * math.sqrt(1 / max(runs, 1) + 1 / len(values))
        if self.log:
            return Interval(c, c * math.exp(-half), c * math.exp(half))
        return Interval(c, c - half, c + half)

    def across(self, groups: list[list[float]], level: float = LEVEL, one_more: bool = False) -> Interval:
        """A config read in several confirmation rounds (the baseline is re-read in each): the machine drifts
        between rounds, so its readings are a two-level sample, and the pooled within-round spread alone gave a
        baseline read 99, 101 and 201 an interval of a few percent that held one of its readings. Here the centre
        is the mean of the round means (tuner.analysis.stats.centre_of_rounds) and the spread the round means'
        own, with k - 1 degrees of freedom for k rounds (t x sd_between x sqrt(1/k), or sqrt(1 + 1/k) for one
        more run), never narrower than the within-round noise gives the same mean. One round: interval() or
        prediction() unchanged."""
        groups = [g for g in groups if g]
        values = [v for g in groups for v in g]
        if len(groups) < 2:
            return self.prediction(values, level) if one_more else self.interval(values, level)
        xs = [[math.log(v) for v in g] if self.log else list(g) for g in groups]
        means = [statistics.fmean(g) for g in xs]
        k, m, extra = len(means), statistics.fmean(means), 1.0 if one_more else 0.0
        half = _t(k - 1, level) * statistics.stdev(means) * math.sqrt(extra + 1 / k)
        if self.df >= 1:  # the within-round noise of a mean of k round means
            half = max(half, _t(self.df, level) * self.sd * math.sqrt(extra + sum(1 / len(g) for g in xs) / k ** 2))
        if self.log:
            return Interval(math.exp(m), math.exp(m - half), math.exp(m + half))
        return Interval(m, m - half, m + half)


def centre(values: list[float], log: bool) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if log else statistics.fmean(values)


def centre_of_rounds(groups: list[list[float]], log: bool) -> float:
    """The mean of the round means (geometric on the log scale): a config read in several rounds weighs each
    round's level once, however many readings it had there. One round: centre() of its values."""
    groups = [g for g in groups if g]
    if len(groups) == 1:
        return centre(groups[0], log)
    means = [statistics.fmean(math.log(v) for v in g) if log else statistics.fmean(g) for g in groups]
    return math.exp(statistics.fmean(means)) if log else statistics.fmean(means)


def pool(groups: list[list[float]]) -> Pooled | None:
    """Pooled spread of several configs' repeated values (log scale when every value is positive)."""
    groups = [g for g in groups if g]
    if not groups:
        return None
    log = all(v > 0 for g in groups for v in g)
    xs = [[math.log(v) for v in g] if log else list(g) for g in groups]
    df = sum(len(g) - 1 for g in xs)
    if df == 0:
        return Pooled(0.0, 0, log)
    return Pooled(math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in xs if len(g) > 1) / df), df, log)


def ratio_interval(a: list[float], b: list[float], pooled: Pooled | None, level: float = LEVEL,
                   against: tuple[int, int] | None = None) -> Interval | None:
    """a / b as a ratio of geometric means, with an interval from the pooled log spread; None without it.
    `against`: the runs behind another such ratio (its numerator's, its denominator's) the interval is to hold
    (a two-sample interval: that ratio's noise counts too)."""
    if not a or not b or any(v <= 0 for v in a + b):
        return None
    ratio = centre(a, True) / centre(b, True)
    if pooled is None or not pooled.log or pooled.df < 1:
        return Interval(ratio, None, None)
    more = sum(1 / max(n, 1) for n in against) if against is not None else 0.0
    half = _t(pooled.df, level) * pooled.sd * math.sqrt(1 / len(a) + 1 / len(b) + more)
    return Interval(ratio, ratio * math.exp(-half), ratio * math.exp(half))


def differ(a: list[float], b: list[float], pooled: Pooled | None, level: float = LEVEL) -> bool | None:
    """Whether two configs' re-runs of one metric differ beyond the noise: a two-sample t-test on the pooled
    spread, |difference of centres| > t x sd x sqrt(1/na + 1/nb), false alarm 1 - level for two equal configs.
    Not whether their two intervals overlap: that asks for a difference of about (1/na + 1/nb)^-1/2 x (1/sqrt(na)
    + 1/sqrt(nb)) times as large (sqrt(2) at equal counts), a test at about 0.5%, not 5%. None: no spread to judge
    by (fewer than two re-runs of any config), or values the pooled scale cannot take."""
    if not a or not b or pooled is None or pooled.df < 1 or (pooled.log and min(a + b) <= 0):
        return None
    diff = abs(math.log(centre(a, True) / centre(b, True))) if pooled.log else abs(centre(a, False) - centre(b, False))
    return diff > _t(pooled.df, level) * pooled.sd * math.sqrt(1 / len(a) + 1 / len(b))


@dataclass(frozen=True)
class NoiseFloor:
    relative_sd: float  # e.g. 0.06: one config's runs vary by about 6% (one standard deviation)
    configs: int
    runs: int
    method: str = NOISE_METHOD

    def to_json(self) -> dict[str, object]:
        return {"relative_sd": self.relative_sd, "configs": self.configs, "runs": self.runs, "method": self.method}

    def text(self) -> str:
        """The line the summary and the report show after "noise floor: "."""
        return (f"one config's throughput varies by {self.relative_sd:.1%} run to run ({self.runs} re-runs of "
                f"{self.configs} config{'s' if self.configs != 1 else ''})")


def noise_floor(groups: list[list[float]]) -> NoiseFloor | None:
    """Run-to-run variation of one config's throughput, pooled over every config measured at least twice."""
    repeated = [g for g in groups if len([v for v in g if v > 0]) >= 2]
    p = pool(repeated)
    if p is None or p.df == 0:
        return None
    return NoiseFloor(math.expm1(p.sd) if p.log else p.sd, len(repeated), sum(len(g) for g in repeated))


def confirmed(reruns: list[Rerun], cap: float | None = None) -> Confirmed:
    """A confirmed trial from its re-runs: the values of every metric all complete re-runs measured, and their
    centres; the intervals need the other confirmed trials too (tuner.analysis.study pools the noise) and are filled
    in there. The search's own reading is left out: it was selected for being good, so it is biased upward (for a
    time to target too: keeping it read equal configs 4-9% sooner, issue 51).

    The to-target figures (tuner.study.TO_TARGET) differ: a run that did not reach the target lacks them by meaning,
    so they are not dropped for it but read over the re-runs with the not-reached runs counted, interval and all,
    by time_to_target (`cap`: the target's cap_seconds, which a not-reached run counts at): the same numbers as the
    export's header, with its one-run interval (rerun_low/high)."""
    ok = [r for r in reruns if r.complete]
    keys = set.intersection(*(set(k for k, v in r.metrics.items() if finite(v) is not None) for r in ok)) \
        if ok else set()
    figures = {}
    for key in sorted(keys - set(TO_TARGET)):
        values = [float(r.metrics[key]) for r in ok]  # type: ignore[arg-type]
        by_round: dict[int | None, list[float]] = {}
        for v, r in zip(values, ok):
            by_round.setdefault(r.round, []).append(v)
        # read in several rounds (the baseline): each round's level counts once
        figures[key] = ConfirmedFigure(values=values, centre=centre_of_rounds(list(by_round.values()),
                                                                              all(v > 0 for v in values)))
    for key in TO_TARGET:
        to = time_to_target(list(reruns), key, cap)
        if to.interval is not None:  # none reached: no figure (tuner.study.fmt_figure says `not reached`)
            one = to.prediction or Interval(to.interval.centre, None, None)
            figures[key] = ConfirmedFigure(values=list(to.values), centre=to.interval.centre, low=to.interval.low,
                                           high=to.interval.high, rerun_low=one.low, rerun_high=one.high,
                                           runs=to.runs, at_least=to.at_least, censored=to.censored,
                                           step=to.step)
    return Confirmed(runs=len(reruns), states=[r.state for r in reruns], figures=figures, method=CENTRE_METHOD,
                     rounds=[r.round for r in ok])


@dataclass(frozen=True)
class TimeToTarget:
    """A config's time to target over its runs (issue 34): the trial and its confirmation re-runs, each re-run
    another seed, so the interval holds seed-to-seed variation. A run that did not reach the target counts against
    the config, as MLPerf counts a run that never converges: it took at least the cap (the target's cap_seconds,
    3x the baseline's time to target), so it enters the centre and the intervals at the cap (`censored`), and the
    centre, then a lower bound, reads `at least`. Without a known cap it is counted in `runs` only and left out
    of the centre (said in the text)."""

    values: tuple[float, ...]  # training seconds to the target of each run that reached it
    runs: int  # complete runs, reached or not
    interval: Interval | None  # the centre and its 95% interval; None: no run reached it
    prediction: Interval | None = None  # where ONE more run (tuner train --until-target) reads, 95%
    censored: float | None = None  # the value each not-reached run counts at (the cap); None: left out
    capped: bool = True  # censored is the target's cap (else the latest of the runs' last evaluations)
    step: float | None = None  # one evaluation step of these runs (seconds or samples): the interval spans it

    @property
    def not_reached(self) -> int:
        return self.runs - len(self.values)

    @property
    def at_least(self) -> bool:
        """The centre counts a not-reached run at the cap, so the true figure is at least it."""
        return self.not_reached > 0 and self.censored is not None and self.interval is not None

    def text(self, unit: str = "s") -> str:
        """`at least 6.93 s (95% 2.1-23 s, reached by 3 of 4 runs: 1 not reached, counted at the 36 s cap)`;
        one run: `4.1 s` or `not reached`."""
        iv = self.interval
        if self.runs <= 1:
            return f"{iv.centre:.3g} {unit}" if iv is not None else "not reached"
        if iv is None:
            return f"not reached in any of {self.runs} runs"
        spread = f"95% {iv.low:.3g}-{iv.high:.3g} {unit}, " if iv.low is not None and iv.high is not None else ""
        missed = ""
        if self.not_reached:
            missed = (f": {self.not_reached} not reached, counted at the {self.censored:.3g} {unit} cap"
                      if self.censored is not None and self.capped else
                      f": {self.not_reached} not reached, counted at {self.censored:.3g} {unit}, its last evaluation"
                      if self.censored is not None else
                      f": {self.not_reached} not reached, left out (no cap known to count it at)")
        return (f"{'at least ' if self.at_least else ''}{iv.centre:.3g} {unit} ({spread}reached by "
                f"{len(self.values)} of {self.runs} runs{missed})")

    def rerun_text(self, unit: str = "s") -> str | None:
        """`2.1-23 s`: where one re-run to the target should read; None without an interval (fewer than 2 runs)."""
        p = self.prediction
        if p is None or p.low is None or p.high is None:
            return None
        return f"{p.low:.3g}-{p.high:.3g} {unit}"


def time_to_target(runs: list[TrialResult], key: str = "time_to_target", cap: float | None = None) -> TimeToTarget:
    """Time to target over `runs` (the trial and its re-runs; failed runs left out): the geometric mean of every
    complete run, each not-reached one counted at `cap` (the target's cap_seconds; for samples_to_target, the
    samples the run had trained at its last evaluation, its own cap in samples), with a t-interval from their
    own spread on the log scale (n - 1 df) and a one-run prediction interval from the same spread. Without a
    cap (None: a target given, not derived) a not-reached run counts at the training seconds of its last
    evaluation, which it had not met the target by. `key`: another to-target figure read the same way."""
    from tuner.target import eval_step

    done = [r for r in runs if r.complete]
    values = [v for r in done if (v := r.value(key)) is not None and v > 0]
    if not values:
        return TimeToTarget((), len(done), None)
    step = eval_step([r.quality_curve for r in done], key)
    missed = [r for r in done if not ((v := r.value(key)) is not None and v > 0)]
    counts = [_censor(r, key, cap) for r in missed]
    censored = None
    if missed and all(c is not None for c in counts):
        censored = max(counts)  # type: ignore[type-var]
        counted = [*values, *counts]
    else:
        counted = list(values)
    p = pool([counted])
    capped = cap is not None and cap > 0 and key != "samples_to_target"
    if p is None:
        return TimeToTarget(tuple(values), len(done), Interval(centre(counted, True), None, None), None, censored,
                            capped, step)
    return TimeToTarget(tuple(values), len(done), _span(p.interval(counted), step),
                        _span(p.prediction(counted), step), censored, capped, step)


def _span(iv: Interval, step: float | None) -> Interval:
    """An interval of a time to target at least one evaluation step wide around its centre (issue 51): each run's
    figure is read between two evaluations, so runs that all met the target at the same evaluation do not claim
    an interval finer than the step (4.34-5.08 s from runs read 2.35 s apart)."""
    if step is None or iv.low is None or iv.high is None:
        return iv
    low = min(iv.low, iv.centre - step / 2)
    return Interval(iv.centre, low if low > 0 else iv.low, max(iv.high, iv.centre + step / 2))


def _censor(run: TrialResult, key: str, cap: float | None) -> float | None:
    """What a not-reached run counts as in `key`: the cap (seconds), else the training seconds of its last
    evaluation; in samples, the samples at its last evaluation (it had not reached the target by then); None:
    not known (no evaluation)."""
    curve = [p for p in run.quality_curve if p and p[0]]
    if key == "samples_to_target":
        return float(curve[-1][0]) if curve else None  # type: ignore[arg-type]
    if cap is not None and cap > 0:
        return cap
    return float(curve[-1][1]) if curve and curve[-1][1] else None  # type: ignore[arg-type]
