"""Pareto ranks over a study's trials and the rules `tuner export --pick` uses to choose one trial.

Only complete trials whose objective values are all finite numbers take part: a trial that ran out of memory,
diverged or errored has no quality to trade against, and is shown apart rather than ranked.

The knee rule (what `--pick knee`, the default, chooses):
  1. Take the Pareto front: the trials that no other trial beats on every objective at once (rank 0).
  2. Rescale each objective to [0, 1] over the front, 1 being the front's best value and 0 its worst
     (an objective that is equal across the front counts as 1 for all).
  3. Choose the trial closest (Euclidean distance) to the ideal point where every rescaled objective is 1,
     i.e. the most balanced trade-off between speed and quality. Ties go to the higher throughput, then to the
     lower trial number.
`--pick throughput` chooses the fastest front trial and `--pick quality` the best-quality one; `--min-quality X`
first drops the trials whose quality is worse than X (above X for a metric to minimize such as FID or loss,
below X for one to maximize such as accuracy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from tuner.errors import StudyError

Pick = Literal["knee", "throughput", "quality"]
THROUGHPUT = "throughput"


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str  # "maximize" or "minimize"

    @property
    def maximize(self) -> bool:
        return self.direction.lower().startswith("max")

    def better(self, a: float, b: float) -> bool:
        """True when a is strictly better than b."""
        return a > b if self.maximize else a < b

    def meets(self, value: float, threshold: float) -> bool:
        """True when value is at least as good as threshold."""
        return value >= threshold if self.maximize else value <= threshold

    @property
    def comparison(self) -> str:
        return ">=" if self.maximize else "<="

    @classmethod
    def from_meta(cls, raw: Any) -> "Objective":
        if isinstance(raw, str):  # tolerate a bare metric name: throughput is maximized, anything else minimized
            return cls(raw, "maximize" if raw in (THROUGHPUT, "accuracy") else "minimize")
        return cls(str(raw["metric"]), str(raw.get("direction", "maximize")))


def objective_value(record: dict[str, Any], objective: Objective) -> float | None:
    """The finite value of an objective in a trial record, or None (missing, NaN, inf, not a number)."""
    value = record.get(objective.metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def rankable(record: dict[str, Any], objectives: list[Objective]) -> bool:
    return record.get("state") == "complete" and all(objective_value(record, o) is not None for o in objectives)


def dominates(a: dict[str, Any], b: dict[str, Any], objectives: list[Objective]) -> bool:
    """a dominates b: no worse on every objective and strictly better on at least one."""
    strictly = False
    for o in objectives:
        va, vb = _value(a, o), _value(b, o)
        if o.better(vb, va):
            return False
        strictly = strictly or o.better(va, vb)
    return strictly


def pareto_ranks(records: Iterable[dict[str, Any]], objectives: list[Objective]) -> dict[int, int]:
    """Non-dominated sorting: {trial: rank}, rank 0 being the Pareto front, 1 the front once 0 is removed, and so
    on. Trials that are not complete or lack a finite objective value get no entry."""
    remaining = [r for r in records if rankable(r, objectives)]
    ranks: dict[int, int] = {}
    rank = 0
    while remaining:
        front = [r for r in remaining if not any(dominates(o, r, objectives) for o in remaining if o is not r)]
        for r in front:
            ranks[int(r["trial"])] = rank
        remaining = [r for r in remaining if int(r["trial"]) not in ranks]
        rank += 1
    return ranks


def _value(record: dict[str, Any], objective: Objective) -> float:
    """The objective value of a rankable record (callers filtered with `rankable`)."""
    value = objective_value(record, objective)
    assert value is not None
    return value


def _goodness(record: dict[str, Any], objective: Objective) -> float:
    """Larger is better, whatever the direction."""
    return _value(record, objective) if objective.maximize else -_value(record, objective)


def _throughput(record: dict[str, Any]) -> float:
    value = objective_value(record, Objective(THROUGHPUT, "maximize"))
    return value if value is not None else -math.inf


def knee(front: list[dict[str, Any]], objectives: list[Objective]) -> dict[str, Any]:
    """The knee of a Pareto front: after rescaling each objective to [0, 1] over the front (1 = best), the trial
    nearest to the ideal point (1, ..., 1). Ties: higher throughput, then lower trial number."""
    if not front:
        raise ValueError("knee of an empty front")
    scaled: dict[int, float] = {}
    bounds = {}
    for o in objectives:
        values = [objective_value(r, o) for r in front]
        bounds[o.metric] = (min(v for v in values if v is not None), max(v for v in values if v is not None))
    for r in front:
        dist2 = 0.0
        for o in objectives:
            lo, hi = bounds[o.metric]
            v = objective_value(r, o)
            assert v is not None
            goodness = 1.0 if hi == lo else ((v - lo) if o.maximize else (hi - v)) / (hi - lo)
            dist2 += (1.0 - goodness) ** 2
        scaled[int(r["trial"])] = math.sqrt(dist2)
    return min(front, key=lambda r: (round(scaled[int(r["trial"])], 12), -_throughput(r), int(r["trial"])))


def quality_objective(objectives: list[Objective]) -> Objective | None:
    """The study's quality objective: the first one that is not throughput (None for a speed-only study)."""
    return next((o for o in objectives if o.metric != THROUGHPUT), None)


def choose(
    records: list[dict[str, Any]],
    objectives: list[Objective],
    pick: Pick = "knee",
    min_quality: float | None = None,
    study: str = "study",
) -> dict[str, Any]:
    """The trial `tuner export --pick` exports. Raises StudyError (one line) when nothing qualifies."""
    complete = [r for r in records if rankable(r, objectives)]
    if not complete:
        states = sorted({str(r.get("state")) for r in records})
        have = f"{len(records)} trials: {', '.join(states)}" if records else "no trials yet"
        raise StudyError(f"study '{study}' has no complete trial ({have}); nothing to pick until a trial completes")
    quality = quality_objective(objectives)
    if quality is None and (pick == "quality" or min_quality is not None):
        what = "--pick quality" if pick == "quality" else "--min-quality"
        raise StudyError(
            f"study '{study}' has no quality objective, so {what} has nothing to use; use --pick throughput"
        )
    if min_quality is not None and quality is not None:
        ok = [r for r in complete if quality.meets(_value(r, quality), min_quality)]
        if not ok:
            best = max(complete, key=lambda r: _goodness(r, quality))
            raise StudyError(
                f"no complete trial in study '{study}' has {quality.metric} {quality.comparison} {min_quality:g}; "
                f"the best is {_value(best, quality):g} (trial {best['trial']}): relax --min-quality"
            )
        complete = ok
    ranks = pareto_ranks(complete, objectives)
    front = [r for r in complete if ranks.get(int(r["trial"])) == 0]
    if pick == "throughput":
        return max(front, key=lambda r: (_throughput(r), -int(r["trial"])))
    if pick == "quality":
        assert quality is not None
        return max(front, key=lambda r: (_goodness(r, quality), _throughput(r), -int(r["trial"])))
    if pick == "knee":
        return knee(front, objectives)
    raise ValueError(f"unknown pick {pick!r}")
