"""The honest answer a study gives: which config, how much faster than the baseline, and whether that is beyond
the noise.

The pick follows the --pick rule (tuner.analysis.pareto) among the trials it may stand on (tuner.analysis.eligible:
the confirmed ones once any is, else those whose reading is not suspect). Throughput read in different confirmation
rounds (or in the search) is ranked and tied like with like: each trial's ratio to the baseline read in the same
round or phase (tuner.analysis.rounds), since the machine drifts between them. When quality cannot tell the trials
apart (tuner.analysis.resolution) the pick goes by throughput and says so, passing over a config whose quality is
worse than the baseline's beyond the noise (the noise that judgement reads). Then ties within the noise
(tuner.analysis.ties), and the comparison with the baseline (trial 0) like with like (tuner.analysis.versus). On a
study the machine's other work slowed, the pick is held to the user's threading, or is their own settings
(tuner.analysis.held), so every view and the export name one pick. The notes say what was left out and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.errors import StudyError
from tuner.study import THROUGHPUT, Objective, TrialRecord, quality_objective
from tuner.analysis.eligible import complete, eligible, names, screened, unconfirmed_rival, within_noise
from tuner.analysis.held import Held, sharing
from tuner.analysis.pareto import Pick, choose
from tuner.analysis.rounds import is_confirmed
from tuner.analysis.stats import RATIO_METHOD, Interval
from tuner.analysis.study import Study
from tuner.analysis.suspect import ranks_windows
from tuner.analysis.ties import resolve_tie
from tuner.analysis.versus import quality_vs_baseline, throughput_ratio, winners_curse, worse_than_baseline


@dataclass
class Verdict:
    pick: TrialRecord
    rule: str
    baseline: TrialRecord | None = None
    ratio: Interval | None = None  # pick / baseline throughput
    tied: list[int] = field(default_factory=list)  # trials indistinguishable from the pick in throughput
    tie_reason: str | None = None  # why the pick won the tie: "quality", "fewer changes to your environment",
    # "fewer workers", "less memory" (tuner.analysis.ties)
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


def decide(study: Study, pick: Pick = "knee", min_quality: float | None = None, for_load: bool = True) -> Verdict:
    """The pick, its ties and its comparison with the baseline. Raises StudyError when nothing qualifies. On a
    study the machine's other work slowed, the pick is held to the user's threading (tuner.analysis.held) unless
    not `for_load` (the load's own pick, as measured: tuner export --keep-load-knobs, the confirmation's chase)."""
    from tuner.analysis.resolution import unresolved

    from tuner.analysis.busy import busy_runs
    from tuner.analysis.whatif import chase_could_move, judging

    quality = quality_objective(study.objectives)
    pool, notes = eligible(study, study.records)
    busy = busy_runs(study.records, study.folder)
    rule: Pick = pick
    q_note = None
    if quality is not None:
        q_note = unresolved(complete(study), quality, study.value, study.pooled(quality.metric),
                            by_throughput=any(o.metric == THROUGHPUT for o in study.objectives), busy=bool(busy))
        if q_note is not None and pick != "throughput":
            rule = "throughput"
    baseline = next((r for r in study.records if r.trial == study.baseline_trial and r.complete), None)
    if q_note is not None and quality is not None and baseline is not None:
        pool, passed = _not_worse(study, pool, baseline, quality)
        notes.extend(passed)
    widened = False
    try:
        first = choose(pool or study.records, study.objectives, rule, min_quality, study=study.name,
                       value=study.value, scale=complete(study))
    except StudyError:
        if min_quality is None or not any(is_confirmed(r) for r in pool):
            raise
        # no confirmed trial meets the user's --min-quality: the unconfirmed ones may, and say so
        pool = [r for r in complete(study) if not (r.get("suspect") and ranks_windows(study.objectives))] \
            or complete(study)
        if q_note is not None and quality is not None and baseline is not None:
            pool, _ = _not_worse(study, pool, baseline, quality)
        first = choose(pool, study.objectives, rule, min_quality, study=study.name, value=study.value,
                       scale=complete(study))
        notes.append("no confirmed trial meets --min-quality: the pick stands on a single, unconfirmed reading")
        widened = True
    candidates = [r for r in pool if min_quality is None or quality is None
                  or quality.meets(study.value(r, quality.metric) or 0.0, min_quality)]
    chosen, tied, reason = resolve_tie(study, first, candidates, None if q_note else quality)
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
        rival = None if widened else unconfirmed_rival(study, pool, rule, min_quality)
        if rival is not None and (inside := within_noise(study, rival, pool, rule)):
            how = " (so not re-run)" if inside.ratio is None else (
                f", as ratios to the baseline read beside each (its search reading {inside.ratio:.2f}x the "
                f"baseline's; so not re-run)")
            notes.append(f"trial {rival.trial} ranks higher on a single, unconfirmed reading, within what one more "
                         f"run of the pick reads{how}; the pick is the best confirmed trial")
        elif rival is not None and not judging() and not chase_could_move(study, rival, decide):
            notes.append(f"trial {rival.trial} ranks higher on a single, unconfirmed reading, but that reading as a "
                         f"re-run would still leave trial {chosen.trial} the pick (so not re-run)")
        elif rival is not None:
            notes.append(f"trial {rival.trial} ranks higher on a single, unconfirmed reading (the confirmation "
                         f"stopped before reaching it); the pick is the best confirmed trial")
        if moved := screened(study, chosen):
            notes.append(f"the knee moved to trial{'s' if len(moved) > 1 else ''} {names(moved)} on a single "
                         f"reading; one re-run {'each ' if len(moved) > 1 else ''}did not hold "
                         f"{'them' if len(moved) > 1 else 'it'} as the pick (so not re-run again)")
    verdict = Verdict(pick=chosen, rule=pick, baseline=baseline, tied=tied, tie_reason=reason,
                      held=held[2] if held is not None else None)
    text = _versus_baseline(study, verdict, label, quality)
    if (curse := winners_curse(study, chosen, candidates, verdict.ratio)) is not None:
        verdict.selection = curse
        text += f" ({curse})"
    if tied:
        text += f"; no difference beyond the noise between trials {names(tied)}: picked {chosen.trial}" + \
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


def _not_worse(study: Study, pool: list[TrialRecord], baseline: TrialRecord,
               quality: Objective) -> tuple[list[TrialRecord], list[str]]:
    """Where quality cannot rank the trials, the pick goes by throughput alone, but never to a config whose quality
    is worse than the baseline's beyond the noise (tuner.analysis.versus.worse_than_baseline, on the noise the
    study-wide judgement reads): the study-wide test asks whether quality ranks all the trials, at a false-alarm
    rate held over all of them, and a fast config that trained worse than the baseline was picked beside the line
    saying so. Returns the trials left and the note naming the ones passed over; the baseline alone where every
    other is passed over."""
    worse = {r.trial: frac for r in pool if r.trial != baseline.trial
             and (frac := worse_than_baseline(study, r, baseline, quality)) is not None}
    if not worse:
        return pool, []
    kept = [r for r in pool if r.trial not in worse] or [baseline]
    left = sorted(worse)
    plural = "s" if len(left) > 1 else ""
    by = ", ".join(f"{worse[n]:.0%}" for n in left)
    return kept, [f"trial{plural} {names(left)} passed over: {quality.metric} worse than the baseline's by {by}, "
                  f"beyond the noise for {'each' if plural else 'that'} one comparison (the test above is over all "
                  f"the trials), so not picked on throughput alone"]


def _held_pick(study: Study, kept: list[TrialRecord], baseline: TrialRecord, rule: Pick, min_quality: float | None,
               quality: Objective | None) -> tuple[TrialRecord, list[int], str | None]:
    """A busy study's pick among `kept` (tuner.analysis.held.sharing) by the verdict's rule, with its ties among
    them; the baseline where none is left or none meets --min-quality."""
    if not kept:
        return baseline, [], None
    try:
        first = choose(kept, study.objectives, rule, min_quality, study=study.name, value=study.value,
                       scale=complete(study))
    except StudyError:
        return baseline, [], None
    return resolve_tie(study, first, kept, quality)


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
        text, verdict.ratio, verdict.statistic = throughput_ratio(study, chosen, baseline, quality)
        parts.append(text)
        if quality is not None and (w := quality_vs_baseline(study, chosen, baseline, quality)):
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
