"""The honest answer a study gives: which config, how much faster than the baseline, and whether that is beyond
the noise.

The pick follows the --pick rule (tuner.study.pareto) on confirmed figures where the confirmation phase re-ran
trials. Then ties: confirmed trials whose throughput intervals overlap the pick's are indistinguishable in speed,
so among them the best quality wins, and if quality is indistinguishable too, fewer loader workers, then less
memory (cheaper to run for the same result). The pick is compared with the baseline (tuner's default knobs, trial
0) as a ratio with its interval: faster or slower beyond the noise, or no difference beyond it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.study.format import fmt_metric
from tuner.study.objective import THROUGHPUT, Objective, quality_objective
from tuner.study.pareto import Pick, choose, rankable
from tuner.study.record import TrialRecord
from tuner.study.stats import RATIO_METHOD, Interval, ratio_interval
from tuner.study.study import Study


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

    def to_json(self) -> dict[str, object]:
        return {"trial": self.pick.trial, "rule": self.rule, "text": self.text,
                "baseline": self.baseline.trial if self.baseline is not None else None,
                "ratio": None if self.ratio is None else
                {"centre": self.ratio.centre, "low": self.ratio.low, "high": self.ratio.high, "method": self.method},
                "tied": self.tied, "tie_reason": self.tie_reason}


def _interval(record: TrialRecord, metric: str) -> Interval | None:
    if record.confirmed is None or metric not in record.confirmed.figures:
        return None
    f = record.confirmed.figures[metric]
    return Interval(f.centre, f.low, f.high)


def _resolve_tie(study: Study, pick: TrialRecord, candidates: list[TrialRecord],
                 quality: Objective | None) -> tuple[TrialRecord, list[int], str | None]:
    """Among trials whose throughput is indistinguishable from the pick's: best quality, then (when quality is
    indistinguishable too) fewer workers, then less memory."""
    mine = _interval(pick, THROUGHPUT)
    if mine is None:
        return pick, [], None
    tied = [r for r in candidates if r.trial == pick.trial
            or ((other := _interval(r, THROUGHPUT)) is not None and other.overlaps(mine))]
    if len(tied) < 2:
        return pick, [], None
    numbers = sorted(r.trial for r in tied)
    if quality is not None:
        best = max(tied, key=lambda r: (quality.goodness(study.value(r, quality.metric) or float("-inf")), -r.trial))
        best_q = _interval(best, quality.metric)
        same_quality = [r for r in tied if r.trial == best.trial
                        or ((q := _interval(r, quality.metric)) is not None and best_q is not None
                            and q.overlaps(best_q))]
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


def decide(study: Study, pick: Pick = "knee", min_quality: float | None = None) -> Verdict:
    """The pick, its ties and its comparison with the baseline. Raises StudyError when nothing qualifies."""
    quality = quality_objective(study.objectives)
    first = choose(study.records, study.objectives, pick, min_quality, study=study.name, value=study.value)
    candidates = [r for r in study.records if rankable(r, study.objectives, study.value)
                  and (min_quality is None or quality is None
                       or quality.meets(study.value(r, quality.metric) or 0.0, min_quality))]
    chosen, tied, reason = _resolve_tie(study, first, candidates, quality)
    baseline = next((r for r in study.records if r.trial == study.baseline_trial and r.complete), None)
    verdict = Verdict(pick=chosen, rule=pick, baseline=baseline, tied=tied, tie_reason=reason)
    parts = [f"trial {chosen.trial} ({pick})"]
    if baseline is None:
        parts.append("no baseline trial to compare with")
    elif baseline.trial == chosen.trial:
        parts.append("the baseline itself (tuner's default knobs) is the pick")
    else:
        mine, theirs = _interval(chosen, THROUGHPUT), _interval(baseline, THROUGHPUT)
        if mine is not None and theirs is not None:
            verdict.ratio = ratio_interval(chosen.confirmed.figures[THROUGHPUT].values,  # type: ignore[union-attr]
                                           baseline.confirmed.figures[THROUGHPUT].values,  # type: ignore[union-attr]
                                           study.pooled(THROUGHPUT))
        r = verdict.ratio
        if r is None or r.low is None or r.high is None:
            mine_v, theirs_v = study.value(chosen, THROUGHPUT), study.value(baseline, THROUGHPUT)
            ratio = f"{mine_v / theirs_v:.2f}x" if mine_v and theirs_v else "?"
            parts.append(f"{ratio} the baseline's (trial {baseline.trial}) throughput in single readings, not "
                         f"confirmed: differences under ~15% are noise on a shared machine")
        elif r.low > 1:
            parts.append(f"{r.centre:.2f}x faster than the baseline (trial {baseline.trial}), interval "
                         f"{r.low:.2f}-{r.high:.2f}x")
        elif r.high < 1:
            trade = ""
            if quality is not None:
                trade = (f", for {quality.metric} {fmt_metric(quality.metric, study.value(chosen, quality.metric))} "
                         f"vs {fmt_metric(quality.metric, study.value(baseline, quality.metric))}")
            parts.append(f"{r.centre:.2f}x the baseline's (trial {baseline.trial}) speed, slower beyond the noise "
                         f"(interval {r.low:.2f}-{r.high:.2f}x){trade}")
        else:
            parts.append(f"no difference beyond the noise from the baseline (trial {baseline.trial}): "
                         f"{r.centre:.2f}x, interval {r.low:.2f}-{r.high:.2f}x")
    text = ": ".join(parts[:1] + ["; ".join(parts[1:])])
    if tied:
        text += f"; no difference beyond the noise between trials {_names(tied)}: picked {chosen.trial}" + \
            (f" for {reason}" if reason else "")
    verdict.text = text
    return verdict
