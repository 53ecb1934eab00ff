"""On a busy machine the pick keeps the user's threading (issue 58).

Beside one spinning process a study picked 1 thread and PASSIVE, and the rest of that pick (fp32 16 x 4) read 0.62x
the baseline once the machine was quiet (benchmarks env-busy): the threads and the wait policy that win under a
load are the load's, and the figures beside them moved with it. So on a study whose verdict says the machine was
busy (tuner.analysis.busy), the pick ranks only the configs that share the user's threading (the baseline's
threads and wait policy) and beat the baseline beyond the noise; failing that, the pick is the baseline, the
user's own settings. Throughput against the baseline is read like with like: confirmed re-runs against the
baseline read in the same round (tuner.analysis.rounds.per_round), single search readings against the baseline's
search reading (and only beyond SINGLE_NOISE: a trial read 1.06x once beside a busy loop was held as beating the
user's settings "beyond the noise" in the line after the verdict called under 15% noise), never a re-run of a fast
round against the baseline's slower one. The confirmation re-runs the knee of the configs that share the user's
threading as well as the load's (tuner.search._confirm.plan_reruns), so the held pick stands on re-runs too.
`tuner export --keep-load-knobs` hands over the load's pick as measured (decide(..., for_load=False)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.study import THROUGHPUT, TrialRecord
from tuner.analysis.pareto import rankable
from tuner.analysis.rounds import by_round, is_confirmed, per_round, search_reading
from tuner.analysis.stats import SINGLE_NOISE, Interval, ratio_interval
from tuner.analysis.study import Study
from tuner.analysis.suspect import ranks_windows


def knob_values(record: TrialRecord, names: tuple[str, ...]) -> dict[str, Any]:
    """The knobs `names` as the trial ran them: its config's, else sampled, else the knob's default."""
    from tuner.config import Params

    params = (record.config or {}).get("params") if isinstance(record.config, dict) else None
    params = params if isinstance(params, dict) else {}
    return {n: params.get(n, record.params.get(n, Params.model_fields[n].default)) for n in names}


def load_knobs_of(record: TrialRecord) -> dict[str, Any]:
    """The trial's load-sensitive knobs (tuner.knobs.load_knobs: threads, the wait policy) as its config set them."""
    from tuner.knobs import load_knobs

    return knob_values(record, load_knobs())


TO_TARGET = ("time_to_target", "samples_to_target")  # lower is sooner


def speed_key(study: Study) -> str:
    """What a held pick must beat the baseline on: throughput, or in a study scored on time (or samples) to a
    target instead, that objective. Judged on throughput there, a time-to-target study beside a 21% load exported
    its baseline although a trial's re-runs reached the target 2.1x sooner (4.1 and 5.0 s against 9.1 and 10.3 s):
    its throughput, which the study does not score, read lower."""
    metrics = [o.metric for o in study.objectives]
    return THROUGHPUT if THROUGHPUT in metrics else next((m for m in metrics if m in TO_TARGET), THROUGHPUT)


def ratio_words(metric: str | None) -> str:
    """How a held pick's ratio to the baseline reads ("2.14x sooner to the target than the baseline")."""
    return {"time_to_target": " sooner to the target than",
            "samples_to_target": " fewer samples to the target than"}.get(metric or THROUGHPUT, "")


def _confirmed(record: TrialRecord, key: str) -> bool:
    return is_confirmed(record) and key in record.confirmed.figures  # type: ignore[union-attr]


def ratio_to_baseline(study: Study, record: TrialRecord, baseline: TrialRecord,
                      key: str = THROUGHPUT) -> tuple[Interval | None, str]:
    """How much faster than the baseline `record` is, like with like, and what it compares ("confirmed" or
    "single"): its throughput over the baseline's, or for a time (samples) to target `key`, the baseline's over
    its own. Where both were confirmed, each re-run over the baseline read in its own round (rounds.per_round; a
    record whose tuner kept no rounds: one round, as the verdict reads it); otherwise, or where the baseline was not
    read in one of its rounds, the two search readings (one phase) with an interval from the study's pooled re-run
    noise."""
    iv, how = _ratio(study, record, baseline, key)
    if key == THROUGHPUT or iv is None:
        return iv, how
    low, high = (None if v is None else 1 / v for v in (iv.high, iv.low))
    return Interval(1 / iv.centre, low, high), how


def _ratio(study: Study, record: TrialRecord, baseline: TrialRecord, key: str) -> tuple[Interval | None, str]:
    pooled = study.pooled(key)
    if _confirmed(record, key) and _confirmed(baseline, key):
        if by_round(record.confirmed, key) is None or by_round(baseline.confirmed, key) is None:
            values = record.confirmed.figures[key].values  # type: ignore[union-attr]
            beside = baseline.confirmed.beside(record.confirmed, key)  # type: ignore[union-attr,arg-type]
            return ratio_interval(values, beside, pooled), "confirmed"
        if (iv := per_round(record, baseline, pooled, key=key)) is not None:
            return iv, "confirmed"
    base = search_reading(baseline, record)  # None: one read beside a load, the other not
    mine, theirs = (record.throughput, base) if key == THROUGHPUT else \
        (record.value(key), baseline.value(key) if base is not None else None)
    if not mine or not theirs:
        return None, ""
    return ratio_interval([mine], [theirs], pooled), "single"


@dataclass
class Held:
    """What a busy study's pick was held to: the load's own pick and its threading, and the pick that shares the
    user's (`own`: the baseline itself), with its ratio to the baseline."""

    pick: int  # the load's pick: what the study ranked first (--keep-load-knobs hands it over)
    knobs: dict[str, Any]  # its threads and wait policy where they differ from the user's
    worst: float  # the largest share of the CPUs other processes took
    exported: int = 0  # the pick, held to the user's threading
    own: bool = True  # the pick is the baseline: nothing sharing the user's threading beat it beyond the noise
    ratio: Interval | None = None  # the held pick over the baseline
    statistic: str = ""  # "confirmed" means or "single" readings
    metric: str = THROUGHPUT  # what the ratio compares (speed_key): throughput, or time (samples) to the target

    def line(self) -> str:
        """The verdict's one line on why the pick is not the load's."""
        knobs = ", ".join(f"{n} {v}" for n, v in self.knobs.items())
        load = (f"trial {self.pick} ({knobs}) won under that load" if knobs else
                f"trial {self.pick} ranked first but did not beat your own settings beyond the noise")
        keep = f"tuner export --keep-load-knobs hands over trial {self.pick}"
        if self.own:
            return (f"no config that shares your threading beat your own settings beyond the noise, so the pick is "
                    f"your own (trial {self.exported}); {load} ({keep})")
        r = self.ratio
        figure = (f" ({r.centre:.2f}x{ratio_words(self.metric)} the baseline, interval {r.low:.2f}-{r.high:.2f}x, "
                  f"{'confirmed means' if self.statistic == 'confirmed' else 'single readings'})"
                  if r is not None and r.low is not None and r.high is not None else "")
        return (f"the pick ranks only configs that share your threading and beat your own settings beyond the "
                f"noise: trial {self.exported}{figure}; {load} ({keep})")

    def to_json(self) -> dict[str, Any]:
        """provenance.held_for_load and the report's JSON."""
        r = self.ratio
        return {"knobs": self.knobs, "pick": self.pick, "worst_share": round(self.worst, 3),
                "why": f"chosen while other processes took up to {self.worst:.0%} of the study's CPUs",
                "exported": self.exported, "own": self.own,
                "vs_baseline": None if self.own or r is None else
                {"ratio": r.centre, "low": r.low, "high": r.high, "statistic": self.statistic, "metric": self.metric}}


def sharing(study: Study, pick: TrialRecord, baseline: TrialRecord, pool: list[TrialRecord],
            worst: float) -> tuple[list[TrialRecord], dict[int, tuple[Interval, str]], Held] | None:
    """The trials a busy study's pick may be made among (those of `pool`, the verdict's eligible ones, that share
    the user's threading and beat the baseline beyond the noise; else such trials among every rankable one whose
    readings are not suspect), their ratios to the baseline, and the Held to fill in. None: nothing to hold, the
    load's `pick` is the baseline or qualifies itself."""
    if pick.trial == baseline.trial:
        return None
    own = load_knobs_of(baseline)
    key = speed_key(study)
    ratios: dict[int, tuple[Interval, str]] = {}

    def fits(r: TrialRecord) -> bool:
        if r.trial == baseline.trial or not r.complete or load_knobs_of(r) != own:
            return False
        if r.trial not in ratios:
            iv, how = ratio_to_baseline(study, r, baseline, key)
            if iv is None or iv.low is None or iv.low <= 1:
                return False
            if how == "single" and iv.centre < 1 + SINGLE_NOISE:  # the verdict calls such single readings noise
                return False
            ratios[r.trial] = (iv, how)
        return True

    if fits(pick):
        return None
    windows = ranks_windows(study.objectives)
    clear = [r for r in study.records if rankable(r, study.objectives, study.value)
             and not (windows and (r.get("suspect") or (r.confirmed is not None and r.confirmed.suspect)))]
    kept = [r for r in pool if fits(r)] or [r for r in clear if fits(r)]
    knobs = {n: v for n, v in load_knobs_of(pick).items() if own.get(n) != v}
    return kept, ratios, Held(pick=pick.trial, knobs=knobs, worst=worst, exported=baseline.trial, metric=key)
