"""Ties: trials whose throughput the noise cannot tell from the pick's. Among confirmed trials whose ratio to the
pick has an interval that includes 1 (read like with like across rounds: tuner.analysis.rounds.side_by_side), the
best quality wins; where quality is indistinguishable too, fewer changes to the user's environment (the knobs set
through it before python starts: the wait policy, malloc), then fewer loader workers, then less memory (cheaper to
run for the same result). The environment comes first because the export hands it to the user's own loop: a
Transformer LM's study picked, for 5% less memory, a trial that tied the baseline (0.95x) and exported
OMP_WAIT_POLICY=PASSIVE with malloc `retain`, a change to the user's environment nothing had measured to pay.
A study scored on time (or samples) to target ranks by that, not by throughput: its ties are judged on it, as
the export's header judges the pick against the baseline (tuner.analysis.reach), else two trials of one
throughput, one reaching the target 2.7x sooner, read as a tie won by memory."""

from __future__ import annotations

from tuner.knobs import env_knobs
from tuner.study import TARGET_COLUMNS, THROUGHPUT, Objective, TrialRecord
from tuner.analysis.held import knob_values
from tuner.analysis.rounds import is_confirmed, side_by_side
from tuner.analysis.stats import Interval, differ
from tuner.analysis.study import Study
from tuner.analysis.reach import compare  # not `to_target.py`: a module of that name shadowed the function tuner.analysis.to_target once imported


def _interval(record: TrialRecord, metric: str) -> Interval | None:
    if record.confirmed is None or metric not in record.confirmed.figures:
        return None
    f = record.confirmed.figures[metric]
    return Interval(f.centre, f.low, f.high)


def resolve_tie(study: Study, pick: TrialRecord, candidates: list[TrialRecord],
                 quality: Objective | None) -> tuple[TrialRecord, list[int], str | None]:
    """Among trials whose throughput is indistinguishable from the pick's: best quality, then (when quality is
    indistinguishable too) fewer environment changes, then fewer workers, then less memory."""
    to_target = next((o.metric for o in study.objectives if o.metric in TARGET_COLUMNS), None)
    if _interval(pick, to_target or THROUGHPUT) is None:
        return pick, [], None
    pooled = study.pooled(THROUGHPUT)

    baseline = next((r for r in study.records if r.trial == study.baseline_trial), None)

    def same_speed(r: TrialRecord) -> bool:
        """The ratio of the two confirmed means, with its interval, includes 1 (the ratio the verdict reports:
        two 95% intervals can overlap while the ratio between them is beyond the noise); read in different
        rounds, the ratio of their ratios to the baseline in each one's round (tuner.analysis.rounds)."""
        if not is_confirmed(r):
            return False
        if to_target is not None:  # the study's speed: within one evaluation step, or within the noise
            c = compare(study, r, pick, to_target)
            if c is None or c.apart:
                return False
            if not any(o.metric == THROUGHPUT for o in study.objectives):
                return True
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

    own = knob_values(baseline, env_knobs()) if baseline is not None else None

    def env_changes(r: TrialRecord) -> int:
        """How many of the knobs set through the environment the trial moved from the baseline's (the user's)."""
        return 0 if own is None else sum(1 for n, v in knob_values(r, env_knobs()).items() if own[n] != v)

    least = min(env_changes(r) for r in tied_q)
    kept = [r for r in tied_q if env_changes(r) == least]
    fewest = min(workers(r) for r in kept)
    lean = [r for r in kept if workers(r) == fewest]
    if len(kept) < len(tied_q):
        reason = "fewer changes to your environment"
    elif len(lean) < len(kept):
        reason = "fewer workers"
    else:
        reason = "less memory"
    chosen = min(lean, key=lambda r: (study.value(r, "peak_mem_mb") or float("inf"), r.trial))
    return chosen, numbers, reason
