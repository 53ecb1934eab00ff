"""Whether a study's quality figures can tell its trials apart, and whether one trial's quality is worse than
another's beyond the noise.

A short budget can leave every model where it started: a classifier at chance (validation loss ~ ln(classes) in
every trial), a GAN's FID all alike. Ranking on such figures ranks noise, so when every complete trial's quality
lies within the noise of every other's, the study says so and the pick goes by throughput alone.

The noise of a quality figure is the run-to-run spread the confirmation re-runs measured (pooled over the confirmed
trials, tuner.analysis.stats). Whether the trials differ at all is one test over all of them (`spread_beyond_noise`,
a one-way analysis of variance on that noise), not a test of every pair: of 6-24 trials of equal quality, some pair
was 5% apart by chance in 15-55% of studies, and the study called its quality rankable. On a spread of fewer than two
degrees of freedom the noise is not known well enough to call anything within it (one config's two re-runs called
FID 73 against 400 within the noise), and without re-runs RESOLUTION (relative) stands for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tuner.study import TARGET_COLUMNS, Objective, TrialRecord, fmt_metric, metric
from tuner.analysis.stats import LEVEL, Pooled, _t, centre

RESOLUTION = 0.02  # without re-runs: quality figures within 2% of each other are one figure
MIN_DF = 2  # the fewest degrees of freedom of the pooled noise that may call a spread within it (as a rival's)
WORSE = 0.10  # without re-runs: a single reading of quality worse by more than 10% is worse beyond the noise


def _readings(record: TrialRecord, key: str) -> int:
    """How many runs stand behind a trial's figure: its confirmed re-runs, else its one reading."""
    figure = record.confirmed.figures.get(key) if record.confirmed is not None else None
    return len(figure.values) if figure is not None and figure.values else 1


def _beyond_noise(a: tuple[float, int], b: tuple[float, int], pooled: Pooled | None, lowest: float) -> bool | None:
    """Whether two figures, each the centre of n runs, differ by more than t x sd x sqrt(1/na + 1/nb) on the
    pooled noise's scale; None where that noise cannot judge them (none pooled, no degree of freedom, or a log
    scale and a reading, `lowest`, at or below 0)."""
    if pooled is None or pooled.df < 1 or (pooled.log and lowest <= 0):
        return None
    (va, na), (vb, nb) = a, b
    width = _t(pooled.df, LEVEL) * pooled.sd * math.sqrt(1 / na + 1 / nb)
    diff = abs(math.log(va) - math.log(vb)) if pooled.log else abs(va - vb)
    return diff > width


def by_noise(mine: list[float], theirs: list[float], pooled: Pooled | None) -> bool:
    """Whether `worse` judges these two by the pooled noise (False: no re-runs to judge by, so by WORSE)."""
    return bool(mine and theirs) and _beyond_noise((mean_of(mine), len(mine)), (mean_of(theirs), len(theirs)),
                                                   pooled, min(mine + theirs)) is not None


def spread_beyond_noise(points: list[tuple[float, int]], pooled: Pooled | None,
                        level: float = LEVEL) -> bool | None:
    """Whether figures (each the centre of n runs) differ among themselves beyond the pooled noise, on the log
    scale where the noise is: one question over all k figures (two: the two-sample test), asked two ways at half the false-alarm rate each
    (a union, so at most 1 - level together): a one-way analysis of variance with the noise known from the re-runs
    (F = sum n_i (x_i - mean)^2 / (k - 1) / sd^2 against F(k - 1, df): differences spread over many trials), and
    each figure against the mean of the others, Bonferroni over the k (t against t(df) at 1 - alpha / 2k: one trial
    apart from the rest, which the F test dilutes among 24). A study whose trials are all alike is then called apart
    at most 1 - level of the time whatever its size (pairs tested one by one: 15-55% at 6-24 trials). None where the
    noise cannot judge: none pooled, fewer than MIN_DF degrees of freedom, a log scale and a figure at or below 0."""
    if pooled is None or pooled.df < MIN_DF or len(points) < 2 or (pooled.log and min(v for v, _ in points) <= 0):
        return None
    xs = [(math.log(v) if pooled.log else v, n) for v, n in points]
    k, total = len(xs), sum(n for _, n in xs)
    mean = sum(x * n for x, n in xs) / total
    between = sum(n * (x - mean) ** 2 for x, n in xs) / (k - 1)
    if pooled.sd <= 0:
        return between > 0
    if k == 2:  # no multiplicity: the two-sample test `worse` judges a pick against its baseline by
        return _beyond_noise(points[0], points[1], pooled, min(v for v, _ in points))
    from scipy.special import fdtri, stdtrit

    alpha = (1 - level) / 2
    if between / pooled.sd ** 2 > float(fdtri(k - 1, pooled.df, 1 - alpha)):
        return True
    t = float(stdtrit(pooled.df, 1 - alpha / (2 * k)))
    for x, n in xs:
        rest = total - n
        others = (mean * total - x * n) / rest
        if abs(x - others) > t * pooled.sd * math.sqrt(1 / n + 1 / rest):
            return True
    return False


def unresolved(records: list[TrialRecord], quality: Objective, value: Callable[[TrialRecord, str], float | None],
               pooled: Pooled | None, by_throughput: bool = True, busy: bool = False) -> str | None:
    """A sentence when every one of these trials' quality is within the noise of the others' (None: it ranks).
    Each pair is tested with the runs behind its two figures, so a confirmed pick and baseline that `worse` finds
    apart are apart here too: the default study's verdict once said both "quality 59% better than the baseline,
    beyond the noise" and "FID 66.17-164 in every trial, within the noise of each other". `by_throughput`: the
    study ranks throughput too, which the pick then goes by (else it stands on a lead within the noise). `busy`:
    other work took a share of the trials' CPUs (tuner.analysis.busy), which the sentence says instead of asking
    for a larger budget."""
    key = quality.metric
    points = [(v, _readings(r, key)) for r in records if (v := value(r, key)) is not None]
    if len(points) < 2:
        return None
    values = [v for v, _ in points]
    beyond = spread_beyond_noise(points, pooled)
    measured = beyond is not None
    if beyond is None:  # no noise to judge by: the resolution does
        mid = max(abs(v) for v in values) or 1.0
        beyond = (max(values) - min(values)) / mid > RESOLUTION
    if beyond:
        return None
    label = metric(key).label
    lo, hi = fmt_metric(key, min(values)), fmt_metric(key, max(values))
    figure = lo if lo == hi else f"{lo}-{hi}"
    why = "no re-runs measured the noise" if pooled is None or pooled.df < 1 else \
        f"the re-runs' spread has {pooled.df} degree{'s' if pooled.df != 1 else ''} of freedom, too few to judge by"
    within = "within the noise of each other" if measured else f"within {RESOLUTION:.0%} of each other ({why})"
    if key in TARGET_COLUMNS:  # a budget raised changes nothing here: the trials reach the target alike
        then = "the pick goes by throughput alone" if by_throughput else "the pick's lead on it is within the noise"
        return (f"{label} {figure} in every trial, {within}: they reach the target alike, so {then}; a stricter "
                f"target or more re-runs (--confirm) would tell them apart")
    if busy:  # trials that other work slowed trained fewer steps: that, not the budget, is what to change
        return (f"{label} {figure} in every trial, {within}: quality does not rank them on this busy machine, so "
                f"the pick goes by throughput alone")
    return (f"{label} {figure} in every trial, {within}: too little training to rank quality, so the pick goes "
            f"by throughput alone; raise the budget")


def mean_of(values: list[float]) -> float:
    """The centre a confirmed figure shows (tuner.analysis.stats.confirmed): geometric where every value is
    positive, so a verdict's `fid 66.17 vs 164` is the table's 66.17, not an arithmetic 67.28 beside it."""
    return centre(values, all(v > 0 for v in values))


def worse(mine: list[float], theirs: list[float], quality: Objective, pooled: Pooled | None) -> float | None:
    """How much worse (a fraction) `mine` is than `theirs` when beyond the noise; None when it is not."""
    if not mine or not theirs:
        return None
    a, b = mean_of(mine), mean_of(theirs)
    if b == 0:
        return None
    frac = ((a - b) if not quality.maximize else (b - a)) / abs(b)
    if frac <= 0:
        return None
    beyond = _beyond_noise((a, len(mine)), (b, len(theirs)), pooled, min(mine + theirs))
    if beyond is None:
        return frac if frac > WORSE else None
    return frac if beyond else None
