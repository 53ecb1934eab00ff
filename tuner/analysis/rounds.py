"""Throughput compared like with like across confirmation rounds.

The machine drifts between the confirmation's rounds (re-runs of one config read 21-22 and then 29-33 samples/s,
minutes apart), and each round re-reads the baseline (tuner.search._confirm). So two trials read in different
rounds are compared through the baseline: each trial's ratio to the baseline read in its own round, and the ratio
of those two ratios, with every sample's noise in its interval. Trials read in the same round (every study
confirmed in one round, or by a tuner that kept no rounds) are compared directly, as before. A trial never re-run
stands on its search reading, taken in yet another phase: it is compared through the baseline's search reading
(in_baseline_units, beyond_one_more_run), where both were read on a quiet machine (search_reading).
"""

from __future__ import annotations

import math
import statistics

from tuner.study import Confirmed, THROUGHPUT, TrialRecord
from tuner.analysis.pareto import Value
from tuner.analysis.stats import LEVEL, Interval, Pooled, _t, ratio_interval


def by_round(c: Confirmed | None, key: str = THROUGHPUT) -> dict[int, list[float]] | None:
    """The values of `key` per round; None where there are none or any value's round is unknown."""
    if c is None or key not in c.figures:
        return None
    values = c.figures[key].values
    if len(c.rounds) != len(values) or any(r is None for r in c.rounds):
        return None
    out: dict[int, list[float]] = {}
    for v, r in zip(values, c.rounds):
        out.setdefault(int(r), []).append(v)  # type: ignore[arg-type]
    return out


def is_confirmed(record: TrialRecord) -> bool:
    """The confirmation phase re-ran the trial and at least one re-run completed with a throughput."""
    return record.confirmed is not None and THROUGHPUT in record.confirmed.figures


def per_round(trial: TrialRecord, baseline: TrialRecord, pooled: Pooled | None,
              level: float = LEVEL, key: str = THROUGHPUT) -> Interval | None:
    """trial / baseline throughput (or `key`) with the drift corrected per round: each of the trial's re-runs over the
    baseline's (geometric) mean in the round it was read in, their geometric mean the ratio; its interval from
    both sides' noise (log scale: sd^2/n for the trial's mean, plus each round's baseline mean weighted by the share
    of the trial's re-runs read in it). One round: the ratio of the two confirmed means, as ratio_interval. None
    where a round is unknown or one of the trial's rounds has no reading of the baseline (no like with like)."""
    mine = by_round(trial.confirmed, key)
    base = by_round(baseline.confirmed, key)
    if mine is None or base is None or any(r not in base for r in mine) \
            or min(v for g in [*mine.values(), *(base[r] for r in mine)] for v in g) <= 0:
        return None
    n = sum(len(g) for g in mine.values())
    level_of = {r: statistics.fmean(math.log(v) for v in base[r]) for r in mine}
    ratio = math.exp(statistics.fmean(math.log(v) - level_of[r] for r, g in mine.items() for v in g))
    if pooled is None or not pooled.log or pooled.df < 1:
        return Interval(ratio, None, None)
    spread = 1 / n + sum((len(g) / n) ** 2 / len(base[r]) for r, g in mine.items())
    half = _t(pooled.df, level) * pooled.sd * math.sqrt(spread)
    return Interval(ratio, ratio * math.exp(-half), ratio * math.exp(half))


def _base_for(trial: dict[int, list[float]], base: dict[int, list[float]] | None) -> list[float] | None:
    """The baseline's values in the rounds this trial was read in (None: the baseline was not read in one)."""
    if base is None or any(r not in base for r in trial):
        return None
    return [v for r in sorted(trial) for v in base[r]]


def side_by_side(a: TrialRecord, b: TrialRecord, baseline: TrialRecord | None, pooled: Pooled | None,
                 level: float = LEVEL) -> Interval | None:
    """a / b throughput, like with like: on the readings of the rounds both were read in; where they were read in
    different rounds, (a / the baseline in a's rounds) / (b / the baseline in b's rounds), its interval from all
    four samples (sd x sqrt(1/na + 1/nA + 1/nb + 1/nB)); all readings against all where rounds are unknown."""
    if a.confirmed is None or b.confirmed is None or THROUGHPUT not in a.confirmed.figures \
            or THROUGHPUT not in b.confirmed.figures:
        return None
    ra, rb = by_round(a.confirmed), by_round(b.confirmed)
    if ra is None or rb is None:
        return ratio_interval(a.confirmed.figures[THROUGHPUT].values, b.confirmed.figures[THROUGHPUT].values,
                              pooled, level)
    shared = sorted(set(ra) & set(rb))
    if shared:
        return ratio_interval([v for r in shared for v in ra[r]], [v for r in shared for v in rb[r]], pooled, level)
    base = by_round(baseline.confirmed) if baseline is not None else None
    a0, b0 = _base_for(ra, base), _base_for(rb, base)
    xa, xb = [v for r in sorted(ra) for v in ra[r]], [v for r in sorted(rb) for v in rb[r]]
    if a0 is None or b0 is None or any(v <= 0 for v in xa + xb + a0 + b0):
        return ratio_interval(xa, xb, pooled, level)
    gm = [math.exp(statistics.fmean(math.log(v) for v in g)) for g in (xa, a0, xb, b0)]
    ratio = (gm[0] / gm[1]) / (gm[2] / gm[3])
    if pooled is None or not pooled.log or pooled.df < 1:
        return Interval(ratio, None, None)
    half = _t(pooled.df, level) * pooled.sd * math.sqrt(sum(1 / len(g) for g in (xa, a0, xb, b0)))
    return Interval(ratio, ratio * math.exp(-half), ratio * math.exp(half))


def search_reading(baseline: TrialRecord | None, record: TrialRecord, *, drift: bool = False) -> float | None:
    """The baseline's search reading as the unit for `record`'s single reading; None where one of the two was read
    while others took BUSY_SHARE of its CPUs and the other not, or with `drift` (the unit of the machine's drift
    between phases) where either was: a default study began beside a spinning process, its baseline read 41.5
    samples/s there (817 once re-run), and the trials after it, quiet or busy, were tabled at 12-16x the baseline
    on that unit, for a load collapses configs unlike (5-44x). Two readings beside one load, of configs that share
    the user's threading, are compared (tuner.analysis.held), as two quiet ones are."""
    if baseline is None or _busy(baseline) != _busy(record) or (drift and _busy(record)):
        return None
    return baseline.throughput


def _busy(record: TrialRecord) -> bool:
    return record.environment is not None and record.environment.busy


def in_baseline_units(records: list[TrialRecord], baseline: int | None, value: Value) -> Value:
    """`value`, but a confirmed trial's throughput read in a later round than the baseline's first is rescaled by
    the baseline's drift between the two rounds: each re-run divided by the baseline's (geometric) mean in its own
    round, times the baseline's mean in its first round; and a trial never re-run, its search reading, by the
    baseline's drift from the search to that round (its search reading against that mean). Ranking on it ranks on
    each trial's ratio to the baseline read beside it. Unchanged where everything was read in one round, or the
    rounds (or the baseline's reading in one of them) are unknown; a search reading unchanged where it or the
    baseline's was read beside a load (search_reading)."""
    base_rec = next((r for r in records if r.trial == baseline), None)
    base = by_round(base_rec.confirmed) if base_rec is not None else None
    if not base or any(v <= 0 for g in base.values() for v in g):
        return value
    level = {r: statistics.fmean(math.log(v) for v in g) for r, g in base.items()}
    first = min(level)

    def like(record: TrialRecord, metric: str) -> float | None:
        if metric == THROUGHPUT and record.confirmed is None:
            single, search = value(record, metric), search_reading(base_rec, record, drift=True)
            return single if single is None or not search or search <= 0 \
                else single / search * math.exp(level[first])
        mine = by_round(record.confirmed) if metric == THROUGHPUT else None
        if mine is None or set(mine) == {first} or any(r not in level for r in mine) \
                or any(v <= 0 for g in mine.values() for v in g):
            return value(record, metric)
        logs = [math.log(v) - level[r] for r, g in mine.items() for v in g]
        return math.exp(statistics.fmean(logs) + level[first])

    return like


def beyond_one_more_run(single: float, single_base: float, values: list[float], base_values: list[float] | None,
                        pooled: Pooled | None, maximize: bool = True, level: float = LEVEL) -> bool | None:
    """Whether a trial's single search reading is better than where one more run of the pick would read, like
    with like: each as a ratio to the baseline read in the same phase (the search's single reading of the
    baseline; the baseline's re-runs in the pick's round), so the drift between the search and the confirmation
    (1.4x seen) is no evidence. Beyond: log(single / single_base) - log(gm(values) / gm(base_values)) exceeds
    t x sd x sqrt(2 + 1/n + 1/nB), one side of a 95% interval (2.5% false alarm for a trial no better than the
    pick). base_values None: the pick is the baseline (its ratio is 1: sqrt(2)). None: no spread to judge by."""
    if pooled is None or not pooled.log or pooled.df < 1 or not values or base_values == []:
        return None
    if min([single, single_base, *values, *(base_values or [])]) <= 0:
        return None
    mine = math.log(single / single_base)
    pick = 0.0 if base_values is None else \
        statistics.fmean(math.log(v) for v in values) - statistics.fmean(math.log(v) for v in base_values)
    spread = 2.0 + (0.0 if base_values is None else 1 / len(values) + 1 / len(base_values))
    half = _t(pooled.df, level) * pooled.sd * math.sqrt(spread)
    return (mine - pick > half) if maximize else (pick - mine > half)


def rival_beyond(rival: TrialRecord, pick: TrialRecord, baseline: TrialRecord | None, pooled: Pooled | None,
                 maximize: bool = True) -> bool | None:
    """beyond_one_more_run for a rival never re-run against the confirmed pick, from their records; None where a
    reading it needs is missing (the baseline's search reading, or either read beside a load; its re-runs in the
    pick's rounds, the rounds)."""
    single, single_base = rival.throughput, search_reading(baseline, rival, drift=True)
    mine = by_round(pick.confirmed)
    if single is None or not single_base or mine is None or baseline is None:
        return None
    values = [v for r in sorted(mine) for v in mine[r]]
    if pick.trial == baseline.trial:
        return beyond_one_more_run(single, single_base, values, None, pooled, maximize)
    base = _base_for(mine, by_round(baseline.confirmed))
    if base is None:
        return None
    return beyond_one_more_run(single, single_base, values, base, pooled, maximize)
