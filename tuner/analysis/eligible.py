"""Which trials a pick may stand on, and which one the confirmation should re-run next.

Once any trial is confirmed, the pick is made among the confirmed trials only (the search's single readings were
selected for being high); otherwise among the trials whose reading is not suspect (tuner.analysis.suspect), and the
verdict says which were passed over. A trial never re-run that the same rule would rank higher is a rival: the
confirmation chases it (next_to_confirm) unless its single reading lies within what one more run of the pick reads,
or would not make it the pick even as a re-run (tuner.analysis.whatif, asked by tuner.search._confirm.next_knee), and
the verdict names it either way."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.errors import StudyError
from tuner.study import THROUGHPUT, TrialRecord, quality_objective
from tuner.analysis.pareto import Pick, choose, rankable
from tuner.analysis.rounds import is_confirmed, rival_beyond, search_reading
from tuner.analysis.study import Study
from tuner.analysis.suspect import ranks_windows


def names(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers[:-1]) + f" and {numbers[-1]}" if len(numbers) > 1 else str(numbers[0])


def complete(study: Study) -> list[TrialRecord]:
    return [r for r in study.records if rankable(r, study.objectives, study.value)]


def eligible(study: Study, records: list[TrialRecord]) -> tuple[list[TrialRecord], list[str]]:
    """The trials a pick is made among, and what the verdict says about the ones left out: where any trial was
    confirmed, only confirmed trials (their re-runs not suspect); otherwise the trials whose reading is not
    suspect. When every candidate is suspect they all stay, and the verdict says so. A study whose objectives are
    not read from the timed windows (time to target alone) passes no trial over for them (ranks_windows)."""
    ranked = [r for r in records if rankable(r, study.objectives, study.value)]
    confirmed = [r for r in ranked if is_confirmed(r)]
    if not ranks_windows(study.objectives):
        return (confirmed or ranked), []
    if confirmed:
        clear = [r for r in confirmed if r.confirmed is not None and r.confirmed.suspect is None]
        if not clear:
            return confirmed, [f"every confirmed trial's re-runs are suspect too ({_see(study)})"]
        left = sorted(r.trial for r in confirmed if r not in clear)
        return clear, _passed_over("re-runs", left, study)
    clear = [r for r in ranked if not r.get("suspect")]
    if not clear and ranked:
        return ranked, [f"every trial's reading is suspect ({_see(study)}): confirm before trusting it"]
    return clear, _passed_over("reading", sorted(r.trial for r in ranked if r.get("suspect")), study)


def _see(study: Study) -> str:
    """Where the suspect readings are shown: the verdict is also printed under the search summary's front table
    and in the export, which have no suspect column."""
    return f"see the suspect column of `tuner report {study.name}`"


def _passed_over(what: str, trials: list[int], study: Study) -> list[str]:
    """The verdict's note on trials left out of the pick for suspect figures ("reading" or "re-runs")."""
    if not trials:
        return []
    plural = "s" if len(trials) > 1 else ""
    noun = f"reading{plural}" if what == "reading" else what
    return [f"suspect {noun} of trial{plural} {names(trials)} passed over ({_see(study)})"]


def unconfirmed_rival(study: Study, pool: list[TrialRecord], rule: Pick,
                       min_quality: float | None) -> TrialRecord | None:
    """Where the pick was made among confirmed trials: the trial the same rule picks when the trials never re-run
    count too (their single reading standing for them), if that is one of them; None otherwise."""
    if not pool or not any(is_confirmed(r) for r in pool):
        return None
    others = [r for r in study.records if r.confirmed is None and rankable(r, study.objectives, study.value)]
    if not others:
        return None
    try:
        mixed = choose([*pool, *others], study.objectives, rule, min_quality, study=study.name, value=study.value)
    except StudyError:
        return None
    return None if is_confirmed(mixed) else mixed


def next_to_confirm(study: Study, pick: Pick = "knee") -> int | None:
    """The trial the confirmation phase should re-run next: the one `decide` would pick if unconfirmed readings
    counted, when that one was never re-run (None: the pick stands on confirmed figures)."""
    from tuner.analysis.resolution import unresolved

    quality = quality_objective(study.objectives)
    pool, _ = eligible(study, study.records)
    rule: Pick = pick
    if quality is not None and unresolved(complete(study), quality, study.value,
                                          study.pooled(quality.metric)) is not None:
        rule = "throughput"
    rival = unconfirmed_rival(study, pool, rule, None)
    if rival is None or within_noise(study, rival, pool, rule):
        return None
    return rival.trial


@dataclass
class Within:
    """within_noise's answer: true where the rival's reading is no evidence against the pick. `ratio`: the rival's
    search reading over the baseline's, where throughput was judged so (like with like), for the verdict to say:
    a reading above the pick's printed one-run range can lie within it as a ratio (the export printed 584-1149
    samples/s beside a rival of 1275 judged at 1.46x the baseline)."""

    ok: bool
    ratio: float | None = None

    def __bool__(self) -> bool:
        return self.ok


def within_noise(study: Study, rival: TrialRecord, pool: list[TrialRecord], rule: Pick) -> Within:
    """Whether the rival's single reading lies, on every objective the rule ranks by, within where one more run of
    the confirmed pick would read (its 95% prediction interval from the pooled re-run spread), or on the worse
    side of it: such a reading is no evidence against the pick (the search's single readings are selected for
    being high), and re-running it on a noisy machine chased the knee through three rounds to "no difference
    beyond the noise". Throughput is compared as each one's ratio to the baseline read in the same phase (the
    machine drifts between the search and the confirmation: tuner.analysis.rounds.beyond_one_more_run) where the
    readings allow. False where the pick has no prediction interval, or one from a spread of a single degree of
    freedom (one config's two re-runs: t = 12.7 puts almost any reading inside it), so the rival is re-run. The
    quality figure's interval is from the noise the study-wide judgement of quality reads, every run of the
    confirmed trials (tuner.analysis.resolution.quality_noise), with its degrees of freedom."""
    from tuner.analysis.resolution import MIN_DF, quality_noise

    try:
        pick = choose(pool, study.objectives, rule, None, study=study.name, value=study.value,
                      scale=complete(study))
    except StudyError:
        return Within(False)
    if pick.confirmed is None:
        return Within(False)
    ranked = [o for o in study.objectives if rule != "throughput" or o.metric == THROUGHPUT]
    baseline = next((r for r in study.records if r.trial == study.baseline_trial), None)
    quality = quality_objective(study.objectives)
    judged = quality.metric if quality is not None else None
    noise = {o.metric: quality_noise(complete(study), o.metric, study.pooled(o.metric)) if o.metric == judged
             else study.pooled(o.metric) for o in ranked}
    for o in ranked:
        fig = pick.confirmed.figures.get(o.metric)
        if fig is not None and fig.runs is None and ((p := noise[o.metric]) is None or p.df < MIN_DF):
            return Within(False)
    ratio = None
    for o in ranked:
        if o.metric == THROUGHPUT and (beyond := rival_beyond(rival, pick, baseline, study.pooled(THROUGHPUT),
                                                              o.mode == "max")) is not None:
            if beyond:  # like with like: each against the baseline read in its own phase (tuner.analysis.rounds)
                return Within(False)
            ratio = rival.throughput / search_reading(baseline, rival, drift=True)  # type: ignore[operator]
            continue
        fig = pick.confirmed.figures.get(o.metric)
        mine = rival.value(o.metric)
        if fig is None or mine is None:
            return Within(False)
        low, high = fig.rerun_low, fig.rerun_high
        if (p := noise[o.metric]) is not None and fig.runs is None and o.metric == judged:
            one = p.across(pick.confirmed.groups(o.metric), one_more=True)
            low, high = one.low, one.high
        if low is None or high is None:
            return Within(False)
        if (mine > high) if o.mode == "max" else (mine < low):
            return Within(False)
    return Within(True, ratio)


def screened(study: Study, chosen: TrialRecord) -> list[int]:
    """Trials the confirmation chased when the knee moved to them and re-ran once only (their re-run did not hold
    them as the pick: tuner.search._confirm.holds): one re-run, read in a later round."""
    return [r.trial for r in study.records if r.trial != chosen.trial and (c := r.confirmed) is not None
            and c.runs == 1 and len(c.rounds) == 1 and (c.rounds[0] or 0) >= 1]
