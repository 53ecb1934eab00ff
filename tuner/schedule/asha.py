"""Pareto-aware asynchronous successive halving (`--scheduler asha`): who goes on at a rung when a study has two
(or more) objectives.

Ray Tune's ASHA ranks one metric, and Optuna cannot prune a multi-objective study; MOASHA (Syne Tune) ranks by
non-dominated sorting but samples at random. Here Optuna's sampler proposes and this scheduler stops: a trial that
closes a rung (a RungReport with its objective values, tuner.search._protocol) is ranked against every trial recorded at that
rung so far, by non-dominated sorting with crowding distance as the tie-break inside a front (MOASHA's rule), and
goes on only if it ranks in the top ceil(n / eta). Asynchronous (Li et al., ASHA): the decision is made when the
trial arrives, never by waiting for the rung to fill, so no worker idles.

Choices, and why:
- ceil, not floor: with floor the second and third trial at an eta=3 rung would have a quota of 0; a wrongly
  stopped front trial is lost for good, a wrongly continued one costs one rung of budget.
- fewer than eta trials at a rung (the candidate included): it goes on; there is nothing to cut 1/eta of yet.
- a trial on the first front at an extreme of some objective (the fastest, or the best quality) goes on: the
  throughput end of the front settles within a few windows, quality needs longer, and a fast trial must not be
  stopped for a quality it has not had the time to reach unless another trial beats it on both there.
- the top rung is the trial's whole budget: recorded (for the study's view) but nothing is decided there.

Nothing here knows Ray (tuner.search's adapter drives it), so the tabular benchmark replays exactly what
`ParetoASHA` decides in a study.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError
from tuner.schedule._base import (CONTINUE, STOP, Decision, PlanRequest, Progress, Scheduler, SchedulerOption,
                                  SchedulerPlan)
from tuner.schedule._kept import kept_entries, kept_error
from tuner.study import Objective, StudyFolder

DEFAULT_ETA = 3.0
DEFAULT_RUNGS = 3  # rungs at budget/eta^2, budget/eta, budget by default

Values = tuple[float, ...]  # one trial's objective values at a rung, in the study's objective order


def rung_budgets(min_budget: float, eta: float, max_budget: float) -> list[float]:
    """r, r*eta, r*eta^2, ... strictly below max_budget, then max_budget: the last rung is the whole trial."""
    if not (min_budget > 0 and max_budget > 0 and eta > 1):
        raise ValueError(f"rungs need min_budget > 0, max_budget > 0 and eta > 1 (got {min_budget}, {max_budget}, "
                         f"{eta})")
    out: list[float] = []
    b = float(min_budget)
    while b < max_budget * (1 - 1e-9):
        out.append(b)
        b *= eta
    return out + [float(max_budget)]


# --- the ranking at a rung (pure) ----------------------------------------------------------------------------


def _costs(values: Sequence[Values], directions: Sequence[bool]) -> list[Values]:
    """Every objective as a cost (smaller is better). A trial with a missing or non-finite value failed its
    evaluation there: it is the worst on every objective, so a fast trial whose quality diverged is not kept as
    'the throughput end of the front'."""
    out = []
    for v in values:
        ok = len(v) == len(directions) and all(x is not None and math.isfinite(x) for x in v)
        out.append(tuple(-x if up else x for x, up in zip(v, directions)) if ok else (math.inf,) * len(directions))
    return out


def _dominates(a: Values, b: Values) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def fronts(values: Sequence[Values], directions: Sequence[bool]) -> list[list[int]]:
    """Non-dominated sorting: indices of `values` by front, the first front first. `directions[i]` is True when
    objective i is maximized."""
    costs = _costs(values, directions)
    n = len(costs)
    beaten_by = [0] * n
    beats: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j and _dominates(costs[i], costs[j]):
                beats[i].append(j)
                beaten_by[j] += 1
    out: list[list[int]] = []
    current = [i for i in range(n) if beaten_by[i] == 0]
    while current:
        out.append(current)
        nxt = []
        for i in current:
            for j in beats[i]:
                beaten_by[j] -= 1
                if beaten_by[j] == 0:
                    nxt.append(j)
        current = sorted(nxt)
    return out


def crowding(values: Sequence[Values], front: Sequence[int], directions: Sequence[bool]) -> dict[int, float]:
    """Crowding distance of each member of one front (NSGA-II): the extremes of every objective get infinity, so
    the ends of the front are kept; inner points get the normalised size of the box their neighbours span."""
    costs = _costs(values, directions)
    dist = {i: 0.0 for i in front}
    if len(front) <= 2:
        return {i: math.inf for i in front}
    for k in range(len(directions)):
        order = sorted(front, key=lambda i: (costs[i][k], i))
        lo, hi = costs[order[0]][k], costs[order[-1]][k]
        dist[order[0]] = dist[order[-1]] = math.inf
        span = hi - lo
        if not math.isfinite(span) or span <= 0:
            continue
        for a, i, b in zip(order, order[1:], order[2:]):
            dist[i] += (costs[b][k] - costs[a][k]) / span
    return dist


def ranking(values: Sequence[Values], directions: Sequence[bool]) -> list[int]:
    """Indices best first: by front, then by crowding distance (larger first), then by index (earlier first)."""
    out: list[int] = []
    for front in fronts(values, directions):
        dist = crowding(values, front, directions)
        out.extend(sorted(front, key=lambda i: (-dist[i], i)))
    return out


def _front_extreme(values: Sequence[Values], front: Sequence[int], i: int, directions: Sequence[bool]) -> bool:
    """Is trial i the best of the first front on some objective?"""
    costs = _costs(values, directions)
    return any(costs[i][k] <= min(costs[j][k] for j in front) for k in range(len(directions)))


def goes_on(candidate: int, values: Sequence[Values], directions: Sequence[bool], eta: float) -> bool:
    """Does trial `candidate` (an index into `values`, every trial recorded at this rung, itself included) go on?

    Yes when there are fewer than eta trials at the rung, when it ranks in the top ceil(n / eta), or when it is on
    the first front at an extreme of some objective (nobody dominates it and it is the best there)."""
    n = len(values)
    if n < eta:
        return True
    first = fronts(values, directions)[0]
    if candidate in first and _front_extreme(values, first, candidate, directions):
        return True
    keep = math.ceil(n / eta - 1e-9)
    return candidate in ranking(values, directions)[:keep]


# --- the scheduler -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RungEntry:
    """One trial closing one rung: its values there and what was decided (True at the top rung: it is done)."""

    trial: str  # tuner's trial number as text, else the runner's trial id
    rung: int
    values: Values
    went_on: bool

    @classmethod
    def of(cls, data: dict[str, Any]) -> "RungEntry":
        return cls(str(data["trial"]), int(data["rung"]), tuple(float(v) for v in data["values"]),
                   bool(data["went_on"]))


class ParetoASHA(Scheduler):
    """Asynchronous successive halving on the Pareto rank of the study's objectives.

    It decides on reports that close a rung (`Progress.rung`) and lets every other report go on. `entries` is
    everything it saw and decided, in order; it is its whole state, so `save`/`restore` write it as JSON and a
    study that keeps its rung entries rebuilds the scheduler with `ParetoASHA(..., entries=...)` after a crash.
    """

    help = "trials report at rungs and the dominated ones stop early (--min-budget, --eta)"
    options = (
        SchedulerOption("min_budget", "--min-budget", "With --scheduler asha: the first rung, in the budget's unit "
                        "(seconds or samples; default: budget / eta^2, three rungs).", "the rungs", null_kept=True),
        SchedulerOption("eta", "--eta", "With --scheduler asha: each rung keeps the best 1/eta of the trials that "
                        "reach it; rungs at min_budget * eta^k (default 3).", "the rungs", null_kept=True),
    )

    def __init__(self, objectives: list[Objective], rungs: list[float], eta: float,
                 entries: Iterable[RungEntry] = ()) -> None:
        if len(objectives) < 1 or any(o.direction is None for o in objectives):
            raise ValueError("ParetoASHA needs the study's objectives with their directions resolved")
        if not rungs or eta <= 1:
            raise ValueError(f"ParetoASHA needs at least one rung and eta > 1 (got {rungs}, eta {eta})")
        self.objectives = list(objectives)
        self.rungs = [float(r) for r in rungs]
        self.eta = float(eta)
        self.entries: list[RungEntry] = []
        for e in entries:
            self._keep(e)

    # the seam ----------------------------------------------------------------------------------------------------

    def decide(self, progress: Progress) -> Decision:
        if progress.rung is None:
            return CONTINUE
        return CONTINUE if self.goes_on_at(progress.trial, progress.rung, progress.values) else STOP

    def kept(self, trial: str) -> list[dict[str, Any]] | None:
        return [asdict(e) for e in self.entries if e.trial == str(trial)]

    @classmethod
    def plan(cls, name: str, ask: PlanRequest) -> SchedulerPlan:
        """eta 3 and three rungs unless given; the rungs end at the trial budget."""
        budget = ask.budget
        whole = float(budget.seconds if budget.seconds is not None else budget.samples)  # type: ignore[arg-type]
        unit = "seconds" if budget.seconds is not None else "samples"
        eta = DEFAULT_ETA if ask.eta is None else float(ask.eta)
        if not eta > 1:
            raise ConfigError(f"--eta must be > 1 (got {eta:g}): each rung keeps 1/eta of the trials that reach it")
        min_budget = ask.min_budget
        if min_budget is None:
            min_budget = whole / eta ** (DEFAULT_RUNGS - 1)
        if not 0 < min_budget < whole:
            raise ConfigError(f"--min-budget must be > 0 and below the trial budget ({whole:g} {unit}; got "
                              f"{min_budget:g}): it is the first rung's budget, in {unit}")
        return SchedulerPlan.of(name, rung_budgets(float(min_budget), eta, whole), eta=eta,
                                min_budget=float(min_budget))

    @classmethod
    def build(cls, plan: SchedulerPlan, objectives: list[Objective], folder: StudyFolder | None) -> "ParetoASHA":
        """With the rung entries the folder kept (those of a trial running at a kill are removed)."""
        return cls(objectives, list(plan.rungs), float(plan.eta or DEFAULT_ETA),
                   entries=stored_entries(folder) if folder is not None else ())

    @classmethod
    def check_kept(cls, folder: StudyFolder) -> None:
        stored_entries(folder, prune=False)

    @classmethod
    def describe(cls, plan: SchedulerPlan) -> str:
        return f"{plan.name} (eta {plan.eta:g}, rungs at {', '.join(f'{b:g}' for b in plan.rungs)})"

    # the ranking's bookkeeping -----------------------------------------------------------------------------------

    @property
    def directions(self) -> list[bool]:
        return [o.maximize for o in self.objectives]

    @property
    def top(self) -> int:
        return len(self.rungs) - 1

    def at_rung(self, rung: int) -> list[RungEntry]:
        """The trials recorded at a rung so far (a trial's latest report there)."""
        latest: dict[str, RungEntry] = {}
        for e in self.entries:
            if e.rung == rung:
                latest[e.trial] = e
        return list(latest.values())

    def goes_on_at(self, trial: str, rung: int, values: Sequence[float]) -> bool:
        """Record `trial` closing `rung` with `values` and say whether it goes on (always at the top rung)."""
        rung = min(int(rung), self.top)
        vals = tuple(float(v) if v is not None else math.nan for v in values)
        if rung >= self.top:
            went_on = True
        else:
            others = [e for e in self.at_rung(rung) if e.trial != trial]
            went_on = goes_on(len(others), [e.values for e in others] + [vals], self.directions, self.eta)
        self._keep(RungEntry(trial=trial, rung=rung, values=vals, went_on=went_on))
        return went_on

    def _keep(self, entry: RungEntry) -> None:
        self.entries.append(RungEntry(str(entry.trial), int(entry.rung), tuple(float(v) for v in entry.values),
                                      bool(entry.went_on)))

    @property
    def decisions(self) -> list[tuple[str, int, bool]]:
        """(trial, rung, went_on) for every decision made below the top rung, in order."""
        return [(e.trial, e.rung, e.went_on) for e in self.entries if e.rung < self.top]

    def stopped_at(self, trial: str) -> int | None:
        """The rung at which `trial` was stopped, or None when it was not (yet)."""
        for e in self.entries:
            if e.trial == str(trial) and not e.went_on:
                return e.rung
        return None

    def debug_string(self) -> str:
        stopped = sum(1 for _, _, on in self.decisions if not on)
        return f"ParetoASHA: rungs {self.rungs}, eta {self.eta:g}; {stopped} of {len(self.decisions)} rung " \
               f"decisions stopped a trial."

    def state(self) -> dict[str, Any]:
        return {"rungs": self.rungs, "eta": self.eta, "objectives": [o.model_dump() for o in self.objectives],
                "entries": [asdict(e) for e in self.entries]}

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_text(json.dumps(self.state()))

    def restore(self, checkpoint_path: str) -> None:
        data = json.loads(Path(checkpoint_path).read_text())
        self.entries = []
        for e in data["entries"]:
            self._keep(RungEntry.of(e))


def stored_entries(folder: StudyFolder, *, prune: bool = True) -> list[RungEntry]:
    """Every recorded trial's rung entries; a file that does not read as them is one StudyError line naming it."""
    out = []
    for path, data in kept_entries(folder, prune=prune):
        try:
            out += [RungEntry.of(e) for e in data]
        except (ValueError, KeyError, TypeError) as err:
            raise kept_error(path, err) from None
    return out
