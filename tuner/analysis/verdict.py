"""The honest answer a study gives: which config, how much faster than the baseline, and whether that is beyond
the noise.

The pick follows the --pick rule (tuner.analysis.pareto) among the trials it may stand on: once any trial is
confirmed, the confirmed trials only (the search's single readings were selected for being high); otherwise the
trials whose reading is not suspect (tuner.analysis.suspect). Throughput read in different confirmation rounds (or in
the search) is ranked and tied like with like: each trial's ratio to the baseline read in the same round or
phase (tuner.analysis.rounds), since the machine drifts between them. When quality cannot tell the trials apart
(tuner.analysis.resolution) the pick goes by throughput and says so. Then ties: confirmed trials whose ratio to the
pick has an interval that includes 1 are indistinguishable in speed, so among them the best quality wins, and if
quality is indistinguishable too, fewer loader workers, then less memory (cheaper to run for the same result).
The pick is compared with the baseline (trial 0) like with like: the ratio of confirmed means with its interval
when both were confirmed, of single readings otherwise, the text saying which; a quality worse or better than
the baseline's beyond the noise is named, and so is the winner's curse of a pick chosen among several confirmed
configs on the re-runs that measure it. On a study the machine's other work slowed, the pick is held to the
user's threading, or is their own settings (tuner.analysis.held), so every view and the export name one pick.

Over 410 lines because the pick, its ties, its rival notes and its comparison with the baseline read one eligible
pool and one set of drift-adjusted figures together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.errors import StudyError
from tuner.study import TARGET_COLUMNS, THROUGHPUT, Objective, TrialRecord, fmt_metric, quality_objective
from tuner.analysis.held import Held, sharing
from tuner.analysis.pareto import Pick, Value, choose, rankable
from tuner.analysis.rounds import is_confirmed, rival_beyond, side_by_side
from tuner.analysis.stats import RATIO_METHOD, Interval, differ, ratio_interval
from tuner.analysis.study import Study
from tuner.analysis.suspect import ranks_windows


@dataclass
class Verdict:
    pick: TrialRecord
    rule: str
    baseline: TrialRecord | None = None
    ratio: Interval | None = None  # pick / baseline throughput
    tied: list[int] = field(default_factory=list)  # trials indistinguishable from the pick in throughput
    tie_reason: str | None = None  # why the pick won the tie: "quality", "fewer workers", "less memory"
    text: str = ""
    method: str = RATIO_METHOD
    statistic: str = ""  # what the ratio compares: "confirmed" means or "single" readings
    quality_ranked: bool = True  # False: quality could not tell the trials apart, the pick went by throughput
    notes: list[str] = field(default_factory=list)  # what was left out of the pick and why
    busy: str | None = None  # other work took a share of the trials' CPUs: which figures that touches
    held: Held | None = None  # on that busy machine, what the pick was held to (tuner.analysis.held)
    selection: str | None = None  # the winner's curse: picked as the best of several on the runs that measure it

    def to_json(self) -> dict[str, object]:
        return {"trial": self.pick.trial, "rule": self.rule, "text": self.text,
                "baseline": self.baseline.trial if self.baseline is not None else None,
                "ratio": None if self.ratio is None else
                {"centre": self.ratio.centre, "low": self.ratio.low, "high": self.ratio.high, "method": self.method},
                "tied": self.tied, "tie_reason": self.tie_reason, "statistic": self.statistic or None,
                "quality_ranked": self.quality_ranked, "notes": self.notes, "machine_busy": self.busy,
                "selection": self.selection, "held_for_load": self.held.to_json() if self.held is not None else None}


def _value(study: Study) -> Value:
    """The figures the pick ranks by: the study's (Study.value), with a confirmed throughput read in a later round
    rescaled by the baseline's drift between rounds (tuner.analysis.rounds), so confirmed trials compare by their
    ratio to the baseline read beside them, not across a drift; the views rank and show the same figures."""
    return study.value


def _interval(record: TrialRecord, metric: str) -> Interval | None:
    if record.confirmed is None or metric not in record.confirmed.figures:
        return None
    f = record.confirmed.figures[metric]
    return Interval(f.centre, f.low, f.high)


def _resolve_tie(study: Study, pick: TrialRecord, candidates: list[TrialRecord],
                 quality: Objective | None) -> tuple[TrialRecord, list[int], str | None]:
    """Among trials whose throughput is indistinguishable from the pick's: best quality, then (when quality is
    indistinguishable too) fewer workers, then less memory."""
    if _interval(pick, THROUGHPUT) is None:
        return pick, [], None
    pooled = study.pooled(THROUGHPUT)

    baseline = next((r for r in study.records if r.trial == study.baseline_trial), None)

    def same_speed(r: TrialRecord) -> bool:
        """The ratio of the two confirmed means, with its interval, includes 1 (the ratio the verdict reports:
        two 95% intervals can overlap while the ratio between them is beyond the noise); read in different
        rounds, the ratio of their ratios to the baseline in each one's round (tuner.analysis.rounds)."""
        if not is_confirmed(r):
            return False
        ratio = side_by_side(r, pick, baseline, pooled)
        return ratio is not None and ratio.contains(1.0)

    tied = [r for r in candidates if r.trial == pick.trial or same_speed(r)]
    if len(tied) < 2:
        return pick, [], None
    numbers = sorted(r.trial for r in tied)
    if quality is not None:
        best = max(tied, key=lambda r: (quality.goodness(study.value(r, quality.metric) or float("-inf")), -r.trial))
        q_pooled = study.pooled(quality.metric)

        def same_quality_as_best(r: TrialRecord) -> bool:
            """The two confirmed means' difference is within the noise (a two-sample test at 5%, as the speed tie
            uses the ratio's interval: two 95% intervals can overlap while the difference is beyond the noise)."""
            a, b = (x.confirmed.figures[quality.metric].values if x.confirmed is not None
                    and quality.metric in x.confirmed.figures else [] for x in (r, best))
            return differ(a, b, q_pooled) is False

        same_quality = [r for r in tied if r.trial == best.trial or same_quality_as_best(r)]
        if len(same_quality) == 1:
            return best, numbers, "quality"
        tied_q = same_quality
    else:
        tied_q = tied

    def workers(r: TrialRecord) -> int:
        return int(r.params.get("num_workers", (r.config or {}).get("params", {}).get("num_workers", 0)) or 0)

    fewest = min(workers(r) for r in tied_q)
    lean = [r for r in tied_q if workers(r) == fewest]
    if len(lean) < len(tied_q):
        reason = "fewer workers"
    else:
        reason = "less memory"
    chosen = min(lean, key=lambda r: (study.value(r, "peak_mem_mb") or float("inf"), r.trial))
    return chosen, numbers, reason


def _names(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers[:-1]) + f" and {numbers[-1]}" if len(numbers) > 1 else str(numbers[0])


def _complete(study: Study) -> list[TrialRecord]:
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
    return [f"suspect {noun} of trial{plural} {_names(trials)} passed over ({_see(study)})"]


def _throughput_ratio(study: Study, chosen: TrialRecord, baseline: TrialRecord, verdict: Verdict,
                      quality: Objective | None) -> str:
    """The pick against the baseline, like with like: confirmed mean vs confirmed mean when both were confirmed,
    the search's single reading vs single reading otherwise; the text says which."""
    if is_confirmed(chosen) and is_confirmed(baseline):
        a = chosen.confirmed.figures[THROUGHPUT].values  # type: ignore[union-attr]
        b = baseline.confirmed.beside(chosen.confirmed, THROUGHPUT)  # type: ignore[union-attr,arg-type]
        verdict.ratio = ratio_interval(a, b, study.pooled(THROUGHPUT))
        verdict.statistic = "confirmed"
        runs = f"{len(a)} re-runs each" if len(a) == len(b) else f"{len(a)} and {len(b)} re-runs"
        if len(b) < len(baseline.confirmed.figures[THROUGHPUT].values):  # type: ignore[union-attr]
            runs += ", read side by side in the same round"
        like = f"confirmed mean vs confirmed mean (geometric, {runs})"
    else:
        verdict.statistic = "single"
        like = ""
    r = verdict.ratio
    if r is None or r.low is None or r.high is None:
        if like and r is not None:
            return (f"{r.centre:.2f}x the baseline's (trial {baseline.trial}) throughput, {like}; too few re-runs "
                    f"for an interval")
        mine_v, theirs_v = chosen.throughput, baseline.throughput
        ratio = f"{mine_v / theirs_v:.2f}x" if mine_v and theirs_v else "?"
        return (f"{ratio} the baseline's (trial {baseline.trial}) throughput in single readings, not confirmed "
                f"(single reading vs single reading): differences under ~15% are noise on a shared machine")
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


def _quality_vs_baseline(study: Study, chosen: TrialRecord, baseline: TrialRecord, quality: Objective) -> str | None:
    """'quality 16% worse than the baseline: fid ...' when the pick's quality is worse beyond the noise, '... better
    ...' when it is better beyond the noise (a trade the user would want to know of either way)."""
    from tuner.analysis.resolution import WORSE, by_noise, mean_of, worse

    key = quality.metric
    if key in TARGET_COLUMNS:  # counted as the export counts it, read at its evaluation step (issue 51)
        from tuner.analysis.to_target import versus_baseline

        return versus_baseline(study, chosen, baseline, key)
    if chosen.confirmed is not None and baseline.confirmed is not None and key in chosen.confirmed.figures \
            and key in baseline.confirmed.figures:
        mine, theirs = chosen.confirmed.figures[key].values, baseline.confirmed.beside(chosen.confirmed, key)
        how = "confirmed mean vs confirmed mean"
    else:
        a, b = chosen.value(key), baseline.value(key)
        if a is None or b is None:
            return None
        mine, theirs, how = [a], [b], "single reading vs single reading"
    m, t = mean_of(mine), mean_of(theirs)
    frac, which = worse(mine, theirs, quality, study.pooled(key)), "worse"
    if frac is None and worse(theirs, mine, quality, study.pooled(key)) is not None and t != 0:
        frac, which = abs(m - t) / abs(t), "better"  # beyond the noise the other way, as a share of the baseline's
    if frac is None:
        return None
    beyond = "beyond the noise" if by_noise(mine, theirs, study.pooled(key)) else \
        f"more than the {WORSE:.0%} tuner calls a difference where no re-runs measured the noise"
    return (f"quality {frac:.0%} {which} than the baseline: {quality.metric} {fmt_metric(key, m)} vs "
            f"{fmt_metric(key, t)} ({how}), {beyond}")


def _unconfirmed_rival(study: Study, pool: list[TrialRecord], rule: Pick,
                       min_quality: float | None) -> TrialRecord | None:
    """Where the pick was made among confirmed trials: the trial the same rule picks when the trials never re-run
    count too (their single reading standing for them), if that is one of them; None otherwise."""
    if not pool or not any(is_confirmed(r) for r in pool):
        return None
    others = [r for r in study.records if r.confirmed is None and rankable(r, study.objectives, study.value)]
    if not others:
        return None
    try:
        mixed = choose([*pool, *others], study.objectives, rule, min_quality, study=study.name, value=_value(study))
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
    if quality is not None and unresolved(_complete(study), quality, study.value,
                                          study.pooled(quality.metric)) is not None:
        rule = "throughput"
    rival = _unconfirmed_rival(study, pool, rule, None)
    if rival is None or _within_noise(study, rival, pool, rule):
        return None
    return rival.trial


_MIN_DF = 2  # degrees of freedom the pooled spread needs before a rival's reading is called within the noise


def _within_noise(study: Study, rival: TrialRecord, pool: list[TrialRecord], rule: Pick) -> bool:
    """Whether the rival's single reading lies, on every objective the rule ranks by, within where one more run of
    the confirmed pick would read (its 95% prediction interval from the pooled re-run spread), or on the worse
    side of it: such a reading is no evidence against the pick (the search's single readings are selected for
    being high), and re-running it on a noisy machine chased the knee through three rounds to "no difference
    beyond the noise". Throughput is compared as each one's ratio to the baseline read in the same phase (the
    machine drifts between the search and the confirmation: tuner.analysis.rounds.beyond_one_more_run) where the
    readings allow. False where the pick has no prediction interval, or one from a spread of a single degree of
    freedom (one config's two re-runs: t = 12.7 puts almost any reading inside it), so the rival is re-run."""
    try:
        pick = choose(pool, study.objectives, rule, None, study=study.name, value=_value(study))
    except StudyError:
        return False
    if pick.confirmed is None:
        return False
    ranked = [o for o in study.objectives if rule != "throughput" or o.metric == THROUGHPUT]
    baseline = next((r for r in study.records if r.trial == study.baseline_trial), None)
    for o in ranked:
        fig = pick.confirmed.figures.get(o.metric)
        if fig is not None and fig.runs is None and ((p := study.pooled(o.metric)) is None or p.df < _MIN_DF):
            return False
    for o in ranked:
        if o.metric == THROUGHPUT and (beyond := rival_beyond(rival, pick, baseline, study.pooled(THROUGHPUT),
                                                              o.mode == "max")) is not None:
            if beyond:  # like with like: each against the baseline read in its own phase (tuner.analysis.rounds)
                return False
            continue
        fig = pick.confirmed.figures.get(o.metric)
        mine = rival.value(o.metric)
        if fig is None or mine is None or fig.rerun_low is None or fig.rerun_high is None:
            return False
        if (mine > fig.rerun_high) if o.mode == "max" else (mine < fig.rerun_low):
            return False
    return True


def _screened(study: Study, chosen: TrialRecord) -> list[int]:
    """Trials the confirmation chased when the knee moved to them and re-ran once only (their re-run did not hold
    them as the pick: tuner.search._confirm.holds): one re-run, read in a later round."""
    return [r.trial for r in study.records if r.trial != chosen.trial and (c := r.confirmed) is not None
            and c.runs == 1 and len(c.rounds) == 1 and (c.rounds[0] or 0) >= 1]


def decide(study: Study, pick: Pick = "knee", min_quality: float | None = None, for_load: bool = True) -> Verdict:
    """The pick, its ties and its comparison with the baseline. Raises StudyError when nothing qualifies. On a
    study the machine's other work slowed, the pick is held to the user's threading (tuner.analysis.held) unless
    not `for_load` (the load's own pick, as measured: tuner export --keep-load-knobs, the confirmation's chase)."""
    from tuner.analysis.resolution import unresolved

    from tuner.analysis.busy import busy_runs

    quality = quality_objective(study.objectives)
    pool, notes = eligible(study, study.records)
    busy = busy_runs(study.records, study.folder)
    rule: Pick = pick
    q_note = None
    if quality is not None:
        q_note = unresolved(_complete(study), quality, study.value, study.pooled(quality.metric),
                            by_throughput=any(o.metric == THROUGHPUT for o in study.objectives), busy=bool(busy))
        if q_note is not None and pick != "throughput":
            rule = "throughput"
    widened = False
    try:
        first = choose(pool or study.records, study.objectives, rule, min_quality, study=study.name,
                       value=_value(study))
    except StudyError:
        if min_quality is None or not any(is_confirmed(r) for r in pool):
            raise
        # no confirmed trial meets the user's --min-quality: the unconfirmed ones may, and say so
        pool = [r for r in _complete(study) if not (r.get("suspect") and ranks_windows(study.objectives))] \
            or _complete(study)
        first = choose(pool, study.objectives, rule, min_quality, study=study.name, value=_value(study))
        notes.append("no confirmed trial meets --min-quality: the pick stands on a single, unconfirmed reading")
        widened = True
    candidates = [r for r in pool if min_quality is None or quality is None
                  or quality.meets(study.value(r, quality.metric) or 0.0, min_quality)]
    chosen, tied, reason = _resolve_tie(study, first, candidates, None if q_note else quality)
    baseline = next((r for r in study.records if r.trial == study.baseline_trial and r.complete), None)
    label = f"trial {chosen.trial} ({pick})"
    held = sharing(study, chosen, baseline, pool, busy.worst) if for_load and busy and baseline is not None \
        else None
    if held is not None and baseline is not None:  # the load's pick gives way to one sharing the user's threading
        kept, ratios, hold = held
        chosen, tied, reason = _held_pick(study, kept, baseline, rule, min_quality, None if q_note else quality)
        candidates = kept
        if chosen.trial != baseline.trial:
            hold.own, hold.exported = False, chosen.trial
            hold.ratio, hold.statistic = ratios[chosen.trial]
            label = f"trial {chosen.trial} ({pick}, sharing your threading)"
        else:
            label = f"trial {chosen.trial} (your own settings)"
    else:
        rival = None if widened else _unconfirmed_rival(study, pool, rule, min_quality)
        if rival is not None and _within_noise(study, rival, pool, rule):
            notes.append(f"trial {rival.trial} ranks higher on a single, unconfirmed reading, within what one more "
                         f"run of the pick reads (so not re-run); the pick is the best confirmed trial")
        elif rival is not None:
            notes.append(f"trial {rival.trial} ranks higher on a single, unconfirmed reading (the confirmation "
                         f"stopped before reaching it); the pick is the best confirmed trial")
        if screened := _screened(study, chosen):
            notes.append(f"the knee moved to trial{'s' if len(screened) > 1 else ''} {_names(screened)} on a single "
                         f"reading; one re-run {'each ' if len(screened) > 1 else ''}did not hold "
                         f"{'them' if len(screened) > 1 else 'it'} as the pick (so not re-run again)")
    verdict = Verdict(pick=chosen, rule=pick, baseline=baseline, tied=tied, tie_reason=reason,
                      held=held[2] if held is not None else None)
    text = _versus_baseline(study, verdict, label, quality)
    if (curse := _winners_curse(study, chosen, candidates, verdict)) is not None:
        verdict.selection = curse
        text += f" ({curse})"
    if tied:
        text += f"; no difference beyond the noise between trials {_names(tied)}: picked {chosen.trial}" + \
            (f" for {reason}" if reason else "")
    if q_note is not None:
        notes.insert(0, q_note)
        verdict.quality_ranked = False
    if verdict.held is not None:
        notes.insert(0, verdict.held.line())
    if busy:  # first: every figure above moves with it
        notes.insert(0, busy.text())
        verdict.busy = busy.text()
    for note in notes:
        text += f"; {note}"
    verdict.notes = notes
    verdict.text = text
    return verdict


def _held_pick(study: Study, kept: list[TrialRecord], baseline: TrialRecord, rule: Pick, min_quality: float | None,
               quality: Objective | None) -> tuple[TrialRecord, list[int], str | None]:
    """A busy study's pick among `kept` (tuner.analysis.held.sharing) by the verdict's rule, with its ties among
    them; the baseline where none is left or none meets --min-quality."""
    if not kept:
        return baseline, [], None
    try:
        first = choose(kept, study.objectives, rule, min_quality, study=study.name, value=_value(study))
    except StudyError:
        return baseline, [], None
    return _resolve_tie(study, first, kept, quality)


def _winners_curse(study: Study, chosen: TrialRecord, candidates: list[TrialRecord], verdict: Verdict) -> str | None:
    """What picking the best of several confirmed configs on the re-runs that also measure it does to its figure:
    the largest of several noisy means reads above its own true mean (+2-6% for 2-8 candidates of one speed, a
    review measured). Said where the pick beat at least one other confirmed candidate
    (the baseline aside) and a ratio to the baseline stands on those re-runs; None otherwise."""
    if verdict.ratio is None or not is_confirmed(chosen):
        return None
    rivals = [r for r in candidates if is_confirmed(r) and r.trial != study.baseline_trial]
    if len(rivals) < 2:
        return None
    return (f"the best of {len(rivals)} confirmed configs on the re-runs that measure it, so its figures read a "
            f"few percent high, the winner's curse; tuner export --verify re-measures it on fresh runs")


def _versus_baseline(study: Study, verdict: Verdict, label: str, quality: Objective | None) -> str:
    """`label: <the trial against the baseline, throughput then quality>`, filling the verdict's ratio."""
    chosen, baseline = verdict.pick, verdict.baseline
    parts = [label]
    if baseline is None:
        parts.append("no baseline trial to compare with")
    elif baseline.trial == chosen.trial:
        parts.append("the baseline itself (tuner's default knobs, the workload's own optimizer settings) is the "
                     + ("pick" if verdict.rule != "trial" else "trial"))
    else:
        parts.append(_throughput_ratio(study, chosen, baseline, verdict, quality))
        if quality is not None and (w := _quality_vs_baseline(study, chosen, baseline, quality)):
            parts.append(w)
    return ": ".join(parts[:1] + ["; ".join(parts[1:])])


def against_baseline(study: Study, record: TrialRecord, label: str | None = None) -> Verdict:
    """A trial the user named (`tuner export --trial N`) compared with the baseline as `decide` compares its pick;
    no rule chose it, so no ties or notes on the others. `label`: how the text names it (default `trial N
    (--trial)`)."""
    baseline = next((r for r in study.records if r.trial == study.baseline_trial and r.complete), None)
    verdict = Verdict(pick=record, rule="trial", baseline=baseline)
    verdict.text = _versus_baseline(study, verdict, label or f"trial {record.trial} (--trial)",
                                    quality_objective(study.objectives))
    return verdict
