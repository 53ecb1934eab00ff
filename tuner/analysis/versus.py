"""The pick against the baseline, like with like: its throughput as the ratio of confirmed means (with its
interval) when both were confirmed, of single readings otherwise, the text saying which; its quality where it is
worse or better than the baseline's beyond the noise; and the winner's curse of a pick chosen among several
confirmed configs on the re-runs that measure it. tuner.analysis.verdict puts these after the pick's name."""

from __future__ import annotations

from tuner.study import TARGET_COLUMNS, THROUGHPUT, Objective, TrialRecord, fmt_metric
from tuner.analysis.eligible import complete
from tuner.analysis.rounds import is_confirmed, search_reading
from tuner.analysis.stats import SINGLE_NOISE, Interval, Pooled, ratio_interval
from tuner.analysis.study import Study


def throughput_ratio(study: Study, chosen: TrialRecord, baseline: TrialRecord,
                     quality: Objective | None) -> tuple[str, Interval | None, str]:
    """The pick against the baseline, like with like: confirmed mean vs confirmed mean when both were confirmed,
    the search's single reading vs single reading otherwise; the text says which. Returns the text, the ratio of
    confirmed means (None: single readings) and what it compares ("confirmed" or "single")."""
    r: Interval | None = None
    if is_confirmed(chosen) and is_confirmed(baseline):
        a = chosen.confirmed.figures[THROUGHPUT].values  # type: ignore[union-attr]
        b = baseline.confirmed.beside(chosen.confirmed, THROUGHPUT)  # type: ignore[union-attr,arg-type]
        r, statistic = ratio_interval(a, b, study.pooled(THROUGHPUT)), "confirmed"
        runs = f"{len(a)} re-runs each" if len(a) == len(b) else f"{len(a)} and {len(b)} re-runs"
        if len(b) < len(baseline.confirmed.figures[THROUGHPUT].values):  # type: ignore[union-attr]
            runs += ", read side by side in the same round"
        like = f"confirmed mean vs confirmed mean (geometric, {runs})"
    else:
        statistic, like = "single", ""
    return _ratio_words(study, chosen, baseline, r, like, quality), r, statistic


def _ratio_words(study: Study, chosen: TrialRecord, baseline: TrialRecord, r: Interval | None, like: str,
                 quality: Objective | None) -> str:
    """throughput_ratio's text: faster, slower (with the quality it trades) or no different beyond the noise."""
    if r is None or r.low is None or r.high is None:
        if like and r is not None:
            return (f"{r.centre:.2f}x the baseline's (trial {baseline.trial}) throughput, {like}; too few re-runs "
                    f"for an interval")
        mine_v, theirs_v = chosen.throughput, baseline.throughput
        if search_reading(baseline, chosen) is None:
            return (f"not compared with the baseline's (trial {baseline.trial}) throughput: one of the two single "
                    f"readings was taken while other processes took a share of its CPUs, the other not")
        ratio = f"{mine_v / theirs_v:.2f}x" if mine_v and theirs_v else "?"
        return (f"{ratio} the baseline's (trial {baseline.trial}) throughput in single readings, not confirmed "
                f"(single reading vs single reading): differences under ~{SINGLE_NOISE:.0%} are noise on a shared "
                f"machine")
    if r.low > 1:
        return (f"{r.centre:.2f}x faster than the baseline (trial {baseline.trial}), {like}, interval "
                f"{r.low:.2f}-{r.high:.2f}x")
    if r.high < 1:
        trade = ""
        if quality is not None:
            trade = (f", for {quality.metric} {fmt_metric(quality.metric, study.value(chosen, quality.metric))} "
                     f"vs {fmt_metric(quality.metric, study.value(baseline, quality.metric))}")
        return (f"{r.centre:.2f}x the baseline's (trial {baseline.trial}) speed, slower beyond the noise "
                f"({like}, interval {r.low:.2f}-{r.high:.2f}x){trade}")
    return (f"no difference beyond the noise from the baseline (trial {baseline.trial}): {r.centre:.2f}x, "
            f"interval {r.low:.2f}-{r.high:.2f}x, {like}")


def quality_vs_baseline(study: Study, chosen: TrialRecord, baseline: TrialRecord, quality: Objective) -> str | None:
    """'quality 16% worse than the baseline: fid ...' when the pick's quality is worse beyond the noise, '... better
    ...' when it is better beyond the noise (a trade the user would want to know of either way)."""
    from tuner.analysis.resolution import WORSE, by_noise, mean_of, worse

    key = quality.metric
    if key in TARGET_COLUMNS:  # counted as the export counts it, read at its evaluation step (issue 51)
        from tuner.analysis.reach import versus_baseline

        return versus_baseline(study, chosen, baseline, key)
    sides = _quality_sides(study, chosen, baseline, key)
    if sides is None:
        return None
    mine, theirs, how, noise = sides
    m, t = mean_of(mine), mean_of(theirs)
    frac, which = worse(mine, theirs, quality, noise), "worse"
    if frac is None and worse(theirs, mine, quality, noise) is not None and t != 0:
        frac, which = abs(m - t) / abs(t), "better"  # beyond the noise the other way, as a share of the baseline's
    if frac is None:
        return None
    beyond = "beyond the noise" if by_noise(mine, theirs, noise) else \
        f"more than the {WORSE:.0%} tuner calls a difference where no re-runs measured the noise"
    return (f"quality {frac:.0%} {which} than the baseline: {quality.metric} {fmt_metric(key, m)} vs "
            f"{fmt_metric(key, t)} ({how}), {beyond}")


def worse_than_baseline(study: Study, record: TrialRecord, baseline: TrialRecord, quality: Objective) -> float | None:
    """How much worse (a fraction) a trial's quality is than the baseline's where `quality_vs_baseline` would say
    it is worse beyond the noise; None otherwise (a time to target is not judged here)."""
    from tuner.analysis.resolution import worse

    sides = None if quality.metric in TARGET_COLUMNS else _quality_sides(study, record, baseline, quality.metric)
    return None if sides is None else worse(sides[0], sides[1], quality, sides[3])


def _quality_sides(study: Study, chosen: TrialRecord, baseline: TrialRecord,
                   key: str) -> tuple[list[float], list[float], str, Pooled | None] | None:
    """Like with like: the pick's and the baseline's confirmed values of `key` (the baseline's read in the pick's
    rounds) where both were re-run, their single readings otherwise; what they compare, in words; and the noise
    that judges them, the one the study-wide judgement of quality reads (tuner.analysis.resolution.quality_noise).
    None where a side has no figure."""
    from tuner.analysis.resolution import quality_noise

    if chosen.confirmed is not None and baseline.confirmed is not None and key in chosen.confirmed.figures \
            and key in baseline.confirmed.figures:
        mine, theirs = chosen.confirmed.figures[key].values, baseline.confirmed.beside(chosen.confirmed, key)
        how = "confirmed mean vs confirmed mean"
    else:
        a, b = chosen.value(key), baseline.value(key)
        if a is None or b is None:
            return None
        mine, theirs, how = [a], [b], "single reading vs single reading"
    return mine, theirs, how, quality_noise(complete(study), key, study.pooled(key))


def winners_curse(study: Study, chosen: TrialRecord, candidates: list[TrialRecord],
                  ratio: Interval | None) -> str | None:
    """What picking the best of several confirmed configs on the re-runs that also measure it does to its figure:
    the largest of several noisy means reads above its own true mean (+2-6% for 2-8 candidates of one speed, a
    review measured). Said where the pick beat at least one other confirmed candidate
    (the baseline aside) and a ratio to the baseline stands on those re-runs; None otherwise."""
    if ratio is None or not is_confirmed(chosen):
        return None
    rivals = [r for r in candidates if is_confirmed(r) and r.trial != study.baseline_trial]
    if len(rivals) < 2:
        return None
    return (f"the best of {len(rivals)} confirmed configs on the re-runs that measure it, so its figures read a "
            f"few percent high, the winner's curse; tuner export --verify re-measures it on fresh runs")
