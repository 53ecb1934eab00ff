"""Whether a study's quality figures can tell its trials apart, and whether one trial's quality is worse than
another's beyond the noise.

A short budget can leave every model where it started: a classifier at chance (validation loss ~ ln(classes) in
every trial), a GAN's FID all alike. Ranking on such figures ranks noise, so when every complete trial's quality
lies within the noise of every other's, the study says so and the pick goes by throughput alone.

The noise of a quality figure is the run-to-run spread of the confirmed trials' runs (their re-runs and the
search's reading, `_points`). Whether the trials differ at all is one test over all of them (`spread_beyond_noise`,
a one-way analysis of variance on that noise), not a test of every pair: of 6-24 trials of equal quality, some pair
was 5% apart by chance in 15-55% of studies, and the study called its quality rankable. On a spread of fewer than two
degrees of freedom the noise is not known well enough to call anything within it (one config's two re-runs called
FID 73 against 400 within the noise), and without re-runs RESOLUTION (relative) stands for it. Figures that differ
more than the re-runs did, but not beyond the noise for want of re-runs, are not called alike: the verdict asks for
more re-runs, not a larger budget. Whether one figure is worse than another beyond the noise (`worse`, the pick
against the baseline) reads the same noise, with its degrees of freedom (`quality_noise`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tuner.study import TARGET_COLUMNS, TO_TARGET, Objective, TrialRecord, finite, fmt_metric, metric
from tuner.analysis.stats import LEVEL, Pooled, _t, centre, pool

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


def readings(record: TrialRecord, key: str) -> list[float]:
    """Every run's reading of `key` for a trial: the search's, then its confirmed re-runs'."""
    search = finite(record.metrics.get(key))
    figure = record.confirmed.figures.get(key) if record.confirmed is not None else None
    return ([search] if search is not None else []) + (list(figure.values) if figure is not None else [])


def quality_noise(records: list[TrialRecord], key: str, pooled: Pooled | None) -> Pooled | None:
    """The run-to-run noise every judgement of a quality figure reads, with its degrees of freedom: pooled over
    every run of each confirmed trial among `records` (the search's reading and its re-runs, `readings`), as
    `unresolved` judges whether quality ranks the trials; `pooled` (the re-runs' alone) where that has no degree
    of freedom, or for a to-target figure, whose runs that missed the target are counted, not read. `worse` and
    the confirmation's chase judge by the same noise: judged on the re-runs alone, a verdict said "quality 25%
    worse ..., beyond the noise" beside the study-wide note that the re-runs were too few to tell the trials
    apart."""
    if key in TO_TARGET:
        return pooled
    noise = pool([g for r in records if len(g := readings(r, key)) > 1])
    return noise if noise is not None and noise.df >= 1 else pooled


def _points(records: list[TrialRecord], key: str, value: Callable[[TrialRecord, str], float | None],
            pooled: Pooled | None) -> tuple[list[tuple[float, int]], Pooled | None]:
    """The figures `spread_beyond_noise` compares (each the centre of n runs) and the noise it judges them by.
    Each trial is every run it had: the search's reading and its re-runs, and the noise is pooled over the
    confirmed trials' runs, the search's among them. If all trials have one quality, every reading is one draw of
    the run-to-run noise, so the analysis of variance holds its false-alarm rate on them (selection makes it
    conservative: a candidate re-run for its good search reading widens its own spread); and the noise gains a
    degree of freedom per confirmed trial. On the re-runs alone a default study's noise had 2 (two configs, two
    re-runs each), where F(11, 2) must exceed 39: FID 54-588 (12 trials), whose re-runs varied by 20%, were called
    within it. A to-target figure counts runs that did not reach the target, so it stays the figure it is."""
    noise = quality_noise(records, key, None)
    if noise is not None:
        return [(centre(g, noise.log), len(g)) for r in records if (g := readings(r, key))], noise
    return [(v, _readings(r, key)) for r in records if (v := value(r, key)) is not None], pooled


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
    """A sentence when quality cannot rank these trials (None: it ranks): their figures are not apart beyond the
    noise (`spread_beyond_noise` on every run of each, `_points`). That is "within the noise of each other" only
    where the readings differ no more than the re-runs did (`apart_as_measured`); where they differ more but the
    re-runs are too few to call it beyond the noise, the sentence says so and asks for re-runs, not a larger budget
    (a default study's FID 54-588, its re-runs 20% apart, was told to raise the budget). `by_throughput`: the
    study ranks throughput too, which the pick then goes by (else it stands on a lead within the noise). `busy`:
    other work took a share of the trials' CPUs (tuner.analysis.busy), which the sentence says instead of asking
    for a larger budget."""
    key = quality.metric
    values = [v for r in records if (v := value(r, key)) is not None]
    if len(values) < 2:
        return None
    points, pooled = _points(records, key, value, pooled)
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
    if measured and pooled is not None and apart_as_measured(points, pooled):
        df = f"{pooled.df} degree{'s' if pooled.df != 1 else ''} of freedom"
        then = _then(by_throughput)
        return (f"{label} {figure}: the trials differ more than their re-runs did, but the re-runs' spread has "
                f"{df}, too few to call that beyond the noise, so {then}; more re-runs (--repeats, --confirm) "
                f"would tell them apart or alike")
    why = "no re-runs measured the noise" if pooled is None or pooled.df < 1 else \
        f"the re-runs' spread has {pooled.df} degree{'s' if pooled.df != 1 else ''} of freedom, too few to judge by"
    within = "within the noise of each other" if measured else f"within {RESOLUTION:.0%} of each other ({why})"
    if key in TARGET_COLUMNS:  # a budget raised changes nothing here: the trials reach the target alike
        then = _then(by_throughput)
        return (f"{label} {figure} in every trial, {within}: they reach the target alike, so {then}; a stricter "
                f"target or more re-runs (--confirm) would tell them apart")
    if busy:  # trials that other work slowed trained fewer steps: that, not the budget, is what to change
        return (f"{label} {figure} in every trial, {within}: quality does not rank them on this busy machine, so "
                f"the pick goes by throughput alone")
    return (f"{label} {figure} in every trial, {within}: too little training to rank quality, so the pick goes "
            f"by throughput alone; raise the budget")


def _then(by_throughput: bool) -> str:
    """What the pick goes by when quality cannot rank the trials. Without throughput it keeps the best figure, whose
    lead this test, over all the trials at once, does not call beyond the noise; its one comparison with the
    baseline is a test of its own and may (the verdict read "1.90x sooner ..., beyond the noise" beside "the pick's
    lead on it is within the noise")."""
    if by_throughput:
        return "the pick goes by throughput alone"
    return ("the pick's lead on it is within the noise of a test over all the trials at once (its comparison with "
            "the baseline alone is a test of its own)")


def apart_as_measured(points: list[tuple[float, int]], pooled: Pooled, level: float = LEVEL) -> bool:
    """Whether the figures differ beyond the noise if the pooled spread were the noise exactly (a chi-square test,
    sum n_i (x_i - mean)^2 / sd^2 against chi2(k - 1)): true where the trials differ more than their re-runs did,
    which `spread_beyond_noise` may still not call beyond the noise when the spread has few degrees of freedom
    (F(11, 4) must exceed 8.8, chi2(11) / 11 only 1.8). It words a verdict, and decides nothing: read as a test it
    called 11-16% of equal-quality studies of 6-24 trials apart (two configs re-run twice)."""
    if pooled.log and min(v for v, _ in points) <= 0:
        return False
    xs = [(math.log(v) if pooled.log else v, n) for v, n in points]
    total = sum(n for _, n in xs)
    mean = sum(x * n for x, n in xs) / total
    ss = sum(n * (x - mean) ** 2 for x, n in xs)
    if pooled.sd <= 0:
        return ss > 0
    from scipy.special import chdtri

    return ss / pooled.sd ** 2 > float(chdtri(len(xs) - 1, 1 - level))


def mean_of(values: list[float]) -> float:
    """The centre a confirmed figure shows (tuner.analysis.stats.confirmed): geometric where every value is
    positive, so a verdict's `fid 66.17 vs 164` is the table's 66.17, not an arithmetic 67.28 beside it."""
    return centre(values, all(v > 0 for v in values))


def worse(mine: list[float], theirs: list[float], quality: Objective, pooled: Pooled | None) -> float | None:
    """How much worse (a fraction) `mine` is than `theirs` when beyond the noise; None when it is not. For a quality
    figure `pooled` is `quality_noise`'s, the noise `unresolved` judges the study by."""
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
